"""Session records, PID start markers, monitor."""
