r"""ALBERT pretraining (MLM + SOP) with the generic albert_tf trainer.

  python -m albert_tf.run_pretraining \
    --config_file=pretraining/albert_base_v2.yaml \
    --params_override='data.input_path=gs://b/train-*.tfrecord,trainer.train_steps=1000' \
    --model_dir=/tmp/albert_base --tpu=local

Modes: train (default), eval (the latest checkpoint over data.eval_input_path),
train_and_eval, continuous_eval. Resumes from <model_dir>/checkpoints when a
checkpoint exists, after checking the config against the run record
(core/run_record.py). Exit code 143 when stopped by SIGTERM after saving.
"""

from albert_tf import cli_flags
from albert_tf.tasks import pretraining

main, cli = cli_flags.training_tool(
    pretraining.PretrainingTask,
    ["train", "eval", "train_and_eval", "continuous_eval"])

if __name__ == "__main__":
  cli()
