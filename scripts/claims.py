"""Kept for old command lines: the claims scheduler is ``python -m reproduction.claims`` (reproduction/claims.py)."""
import sys; sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))  # noqa: E702
from reproduction.claims import main; sys.exit(main())  # noqa: E401,E702
