"""Where the repository is, and the tests' own data in it."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
TESTDATA = os.path.join(ROOT, "tests", "testdata")
# The real English text of the tests (public domain, from the sentencepiece
# source distribution).
BOTCHAN = os.path.join(TESTDATA, "botchan.txt")
# Directories saved by transformers itself, with its outputs
# (tools/make_hf_fixtures.py).
HF_FIXTURES = os.path.join(TESTDATA, "hf")
