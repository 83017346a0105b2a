"""What every tool of the project shares: files written whole or not at all
and claims on outputs (`output_files`, `owner_lock`), TFRecord framing
without TensorFlow (`tfrecord_io`), and the strict command line
(`command_line`). Imports nothing of ours and no TensorFlow, so data-prep
machines and Beam workers run it as they are."""
