"""`python -m ivoai` entry point."""

from ivoai.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
