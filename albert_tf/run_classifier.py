r"""Fine-tunes ALBERT on a GLUE task (sentence / sentence-pair classification,
STS-B regression) with the generic albert_tf trainer.

  python -m albert_tf.run_classifier \
    --config_file=models/albert_base_v2.yaml \
    --config_file=finetuning/glue_mnli.yaml \
    --data_dir=glue/MNLI --spm_model_file=albert_base/30k-clean.model \
    --init_checkpoint=albert_base/model.ckpt-best \
    --model_dir=/tmp/mnli --mode=train_and_eval

--data_dir holds the GLUE download's TSV files (train.tsv, dev.tsv or
dev_matched.tsv/dev_mismatched.tsv, test*.tsv; diagnostic.tsv for AX with
--task_name=mnli). Modes (core/train_lib.py): train, eval (dev metrics ->
eval_results.json), predict (test -> the GLUE server's <TASK>.tsv files),
train_and_eval, export (serving SavedModel: text -> label).
"""

from albert_tf import cli_flags
from albert_tf.tasks import sentence_prediction

main, cli = cli_flags.training_tool(sentence_prediction.ClassifierTask)

if __name__ == "__main__":
  cli()
