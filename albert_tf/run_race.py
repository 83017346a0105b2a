r"""Fine-tunes ALBERT on RACE (4-way multiple choice) with the generic trainer.

  python -m albert_tf.run_race \
    --config_file=models/albert_base_v2.yaml \
    --config_file=finetuning/race.yaml \
    --data_dir=RACE --spm_model_file=albert_base/30k-clean.model \
    --init_checkpoint=albert_base/model.ckpt-best \
    --model_dir=/tmp/race --mode=train_and_eval

--data_dir holds train/ dev/ test/, each with middle/ and high/ JSON files.
`eval` reports accuracy on middle, high and all (dev) into eval_results.json;
`predict` answers the test questions: race_predictions.json
({"<level>/<file id>-<question>": "A".."D"}) and race_predictions.tsv, plus
test accuracy when the test files carry answers (the public ones do).
"""

from albert_tf import cli_flags
from albert_tf.tasks import multiple_choice

main, cli = cli_flags.training_tool(multiple_choice.RaceTask)

if __name__ == "__main__":
  cli()
