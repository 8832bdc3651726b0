"""The two constants the patch changes (in a second file, so a patch can be half-applied)."""

VERSION = "original"
SLEEP_S = 0.06
FACTOR = 2
