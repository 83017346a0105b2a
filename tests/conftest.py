"""Test setup: quiet TensorFlow logs, no GPU.

The tests are packages (tests/__init__.py, tests/<area>/__init__.py), so
pytest puts the repository root on sys.path itself; helpers are imported as
`tests.testing.<module>`.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
