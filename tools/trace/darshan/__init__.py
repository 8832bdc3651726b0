"""Darshan logs as input: read through PyDarshan's libdarshan-util, mapped onto dftune's Analysis.

Nothing is imported here: tools/trace imports this package's modules (model, detect) and they
import tools/trace's, so each module is imported by its full name.
"""
