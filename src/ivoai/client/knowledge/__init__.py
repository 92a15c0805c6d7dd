"""Server profiles, pools, the per-session knowledge router, circuit breakers."""
