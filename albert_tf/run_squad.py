r"""Fine-tunes ALBERT on SQuAD v1.1 or v2.0 with the generic albert_tf trainer.

  python -m albert_tf.run_squad \
    --config_file=models/albert_base_v2.yaml \
    --config_file=finetuning/squad_v2.0.yaml \
    --train_file=squad/train-v2.0.json --predict_file=squad/dev-v2.0.json \
    --spm_model_file=albert_base/30k-clean.model \
    --init_checkpoint=albert_base/model.ckpt-best \
    --model_dir=/tmp/squad2 --mode=train_and_eval

Writes `predictions.json` (question id -> answer text, "" for no answer),
`null_odds.json` (v2.0: question id -> log-odds of no answer, the input of
the official evaluation's threshold search) and `nbest_predictions.json` to
--output_dir; `eval` also computes the official EM/F1 (v2.0: HasAns/NoAns
and best threshold) into eval_results.json. See albert_tf/data/squad_data.py for
windowing, answer alignment and the no-answer rule.
"""

from albert_tf import cli_flags
from albert_tf.tasks import question_answering

main, cli = cli_flags.training_tool(question_answering.SquadTask)

if __name__ == "__main__":
  cli()
