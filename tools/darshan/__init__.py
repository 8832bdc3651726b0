"""Darshan logs as input: read through PyDarshan's libdarshan-util, mapped onto dftune's Analysis."""

from dftune.tools.darshan.detect import is_darshan_log

__all__ = ["is_darshan_log"]
