"""Tests for albert_tf.data.glue_data: the public GLUE TSV formats, malformed rows,
feature conversion with the shared tokenizer, submission files."""

import os

import numpy as np
import pytest

from albert_tf.data import finetune_features
from albert_tf.data import glue_data
from tests.testing import finetune_testlib

# Rows in the exact layouts of the GLUE download (tab-separated, unquoted).
FILES = {
    "cola": {
        "train.tsv": "gj04\t1\t\tOur friends won't buy this analysis.\n"
                     "gj04\t0\t*\tThey drank the pub.\n",
        "dev.tsv": "gj04\t1\t\tThe sailors rode the breeze clear of the rocks.\n",
        "test.tsv": "index\tsentence\n0\tBill whistled past the house.\n",
    },
    "sst-2": {
        "train.tsv": "sentence\tlabel\nhide new secretions \t0\n"
                     "contains no wit , only labored gags \t0\n"
                     "that loves its characters \t1\n",
        "dev.tsv": "sentence\tlabel\nit 's a charming journey . \t1\n",
        "test.tsv": "index\tsentence\n0\tuneasy mishmash of styles\n",
    },
    "mrpc": {
        "train.tsv": "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                     "1\t702876\t702977\tAmrozi accused his brother .\t"
                     "Referring to him , Amrozi accused his brother .\n",
        "dev.tsv": "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                   "0\t1\t2\tHe said \"no\" .\tShe said 'yes' .\n",
        "test.tsv": "index\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
                    "0\t1089874\t1089925\tPCCW 's chief .\tCurrent chief .\n",
    },
    "sts-b": {
        "train.tsv": "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2"
                     "\tsentence1\tsentence2\tscore\n"
                     "0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\t"
                     "A plane is taking off.\tAn air plane is taking off.\t"
                     "5.000\n",
        "dev.tsv": "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2"
                   "\tsentence1\tsentence2\tscore\n"
                   "0\tmain-captions\tMSRvid\t2012test\t0000\tnone\tnone\t"
                   "A man with a hard hat is dancing.\tA man is dancing.\t"
                   "3.800\n",
        "test.tsv": "index\tgenre\tfilename\tyear\told_index\tsource1\t"
                    "source2\tsentence1\tsentence2\n"
                    "0\tmain-news\theadlines\t2016\t0\tnone\tnone\t"
                    "A girl is styling her hair.\tA girl is brushing.\n",
    },
    "qqp": {
        "train.tsv": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                     "133273\t213221\t213222\tHow is the life of a math "
                     "student?\tWhich level of prepration is enough?\t0\n",
        "dev.tsv": "id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n"
                   "201359\t303345\t303346\tWhy are African-Americans so "
                   "beautiful?\tWhy are hispanics so beautiful?\t0\n",
        "test.tsv": "id\tquestion1\tquestion2\n"
                    "0\tWhy am I mentally very lonely?\tHow do I stop?\n",
    },
    "mnli": {
        "train.tsv": "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\t"
                     "sentence2_binary_parse\tsentence1_parse\tsentence2_parse"
                     "\tsentence1\tsentence2\tlabel1\tgold_label\n"
                     "0\t31193\t31193n\tgovernment\t( ( C ) )\t( P )\t(ROOT)"
                     "\t(ROOT)\tConceptually cream skimming has two basic "
                     "dimensions.\tProduct and geography are what make cream "
                     "skimming work.\tneutral\tneutral\n",
        "dev_matched.tsv": "index\tpromptID\tpairID\tgenre\t"
                           "sentence1_binary_parse\tsentence2_binary_parse\t"
                           "sentence1_parse\tsentence2_parse\tsentence1\t"
                           "sentence2\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5"
                           "\tgold_label\n"
                           "0\t63735\t63735n\tslate\t( x )\t( y )\t(ROOT)\t"
                           "(ROOT)\tThe new rights are nice enough\tEveryone "
                           "really likes the newest benefits \tneutral\t"
                           "entailment\tneutral\tneutral\tneutral\tneutral\n",
        "dev_mismatched.tsv": "index\tpromptID\tpairID\tgenre\t"
                              "sentence1_binary_parse\tsentence2_binary_parse"
                              "\tsentence1_parse\tsentence2_parse\tsentence1\t"
                              "sentence2\tlabel1\tlabel2\tlabel3\tlabel4\t"
                              "label5\tgold_label\n"
                              "0\t75290\t75290c\tletters\t( x )\t( y )\t"
                              "(ROOT)\t(ROOT)\tYour contribution helped.\t"
                              "Your contributions were of no help.\t"
                              "contradiction\tcontradiction\tcontradiction\t"
                              "contradiction\tcontradiction\tcontradiction\n",
        "test_matched.tsv": "index\tpromptID\tpairID\tgenre\t"
                            "sentence1_binary_parse\tsentence2_binary_parse\t"
                            "sentence1_parse\tsentence2_parse\tsentence1\t"
                            "sentence2\n"
                            "0\t31493\t31493\ttravel\t( x )\t( y )\t(ROOT)\t"
                            "(ROOT)\tHierbas, ans seco.\tThe drinks are "
                            "named.\n",
    },
    "qnli": {
        "train.tsv": "index\tquestion\tsentence\tlabel\n0\tWhen did the "
                     "third Digimon series begin?\tUnlike the two seasons "
                     "before it.\tnot_entailment\n",
        "dev.tsv": "index\tquestion\tsentence\tlabel\n0\tWhat came into force"
                   "?\tThe Treaty came into force.\tentailment\n",
        "test.tsv": "index\tquestion\tsentence\n0\tWhat?\tThat.\n",
    },
    "rte": {
        "train.tsv": "index\tsentence1\tsentence2\tlabel\n0\tNo Weapons of "
                     "Mass Destruction Found in Iraq Yet.\tWeapons of Mass "
                     "Destruction Found in Iraq.\tnot_entailment\n",
        "dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\tDana Reeve died."
                   "\tChristopher Reeve had an accident.\tnot_entailment\n",
        "test.tsv": "index\tsentence1\tsentence2\n0\tMexico lost.\tIt won.\n",
    },
    "wnli": {
        "train.tsv": "index\tsentence1\tsentence2\tlabel\n0\tI stuck a pin "
                     "through a carrot.\tThe carrot had a hole.\t1\n",
        "dev.tsv": "index\tsentence1\tsentence2\tlabel\n0\tThe drain is "
                   "clogged.\tThe hair is clogged.\t0\n",
        "test.tsv": "index\tsentence1\tsentence2\n0\tMaude and Dora.\tDora "
                    "had.\n",
    },
}

EXPECTED_TRAIN = {
    "cola": ("They drank the pub.", None, "0"),
    "sst-2": ("that loves its characters", None, "1"),
    "mrpc": ("Amrozi accused his brother .",
             "Referring to him , Amrozi accused his brother .", "1"),
    "sts-b": ("A plane is taking off.", "An air plane is taking off.", 5.0),
    "qqp": ("How is the life of a math student?",
            "Which level of prepration is enough?", "0"),
    "mnli": ("Conceptually cream skimming has two basic dimensions.",
             "Product and geography are what make cream skimming work.",
             "neutral"),
    "qnli": ("When did the third Digimon series begin?",
             "Unlike the two seasons before it.", "not_entailment"),
    "rte": ("No Weapons of Mass Destruction Found in Iraq Yet.",
            "Weapons of Mass Destruction Found in Iraq.", "not_entailment"),
    "wnli": ("I stuck a pin through a carrot.", "The carrot had a hole.", "1"),
}


def _write(directory, files):
  os.makedirs(directory, exist_ok=True)
  for name, text in files.items():
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      f.write(text)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
  return finetune_testlib.tokenizer(tmp_path_factory)


@pytest.mark.parametrize("task", sorted(FILES))
def test_reads_public_format(task, tmp_path):
  _write(str(tmp_path), FILES[task])
  train = glue_data.read_examples(task, str(tmp_path), "train")
  last = train[-1]
  assert (last.text_a, last.text_b, last.label) == EXPECTED_TRAIN[task]
  evals, tests = glue_data.task_splits(task)
  for split in evals:
    if glue_data.get_task(task).files[split] in FILES[task]:
      dev = glue_data.read_examples(task, str(tmp_path), split)
      assert len(dev) == 1 and dev[0].label is not None
  test = glue_data.read_examples(task, str(tmp_path), tests[0])
  assert len(test) == 1 and test[0].label is None and test[0].index == "0"


def test_mnli_mismatched_and_labels(tmp_path):
  _write(str(tmp_path), FILES["mnli"])
  mm = glue_data.read_examples("MNLI", str(tmp_path), "dev_mismatched")
  assert mm[0].label == "contradiction"
  assert glue_data.num_labels("mnli") == 3
  assert glue_data.num_labels("STS-B") == 1
  with pytest.raises(ValueError, match="unknown GLUE task"):
    glue_data.get_task("squad")


def test_columns_by_name_and_rows_at_lf(tmp_path):
  """MNLI's label is the gold_label column wherever it is (not the last
  column); a header naming a column twice is refused; a bare CR is text in
  a field (rows end at LF, as the original's reader reads them), so a row
  is not cut in two."""
  _write(str(tmp_path), {
      "dev_matched.tsv": "index\tsentence1\tsentence2\tgold_label\tlabel1\n"
                         "0\ta\tb\tentailment\tneutral\n"
                         "1\tgood\rmovie\td\tcontradiction\tneutral\r\n"})
  examples = glue_data.read_examples("mnli", str(tmp_path), "dev")
  assert [(e.text_a, e.label) for e in examples] == [
      ("a", "entailment"), ("good\rmovie", "contradiction")]
  _write(str(tmp_path), {"train.tsv": "index\tsentence\tlabel\tsentence\n"
                                      "0\tx\t1\ty\n"})
  with pytest.raises(glue_data.GlueFormatError, match=(
      r"train.tsv:1: header names column 'sentence' twice")):
    glue_data.read_examples("sst-2", str(tmp_path), "train")


def test_malformed_rows_error_names_file_and_line(tmp_path):
  _write(str(tmp_path), {
      "train.tsv": "index\tsentence1\tsentence2\tlabel\n"
                   "0\tgood row\tfine\tentailment\n"
                   "1\tmissing a field\tentailment\n"
                   "2\tbad label\there\tmaybe\n"
                   "3\tanother good\tone\tnot_entailment\n"})
  path = os.path.join(str(tmp_path), "train.tsv")
  with pytest.raises(glue_data.GlueFormatError,
                     match=rf"{path}:3: expected 4 tab-separated fields"):
    glue_data.read_examples("rte", str(tmp_path), "train")
  stats = glue_data.ReadStats()
  examples = glue_data.read_examples("rte", str(tmp_path), "train",
                                     skip_malformed=True, stats=stats)
  assert [e.index for e in examples] == ["0", "3"]
  assert stats.rows == 4 and stats.skipped == 2
  assert stats.examples_of_skips[1].startswith(f"{path}:4: unknown label")


def test_bad_score_and_missing_header_column(tmp_path):
  header = ("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t"
            "sentence1\tsentence2\tscore\n")
  _write(str(tmp_path), {"train.tsv": header + "0\ta\tb\tc\td\te\tf\tx\ty\t"
                                               "high\n",
                         "dev.tsv": "index\tsentence1\n0\tx\n"})
  with pytest.raises(glue_data.GlueFormatError, match=r"train.tsv:2: score"):
    glue_data.read_examples("sts-b", str(tmp_path), "train")
  # Scores are 0 to 5: nan (which made every correlation NaN), inf and
  # out-of-range ones are refused; 0 and 5 are kept.
  rows = "".join(f"{i}\ta\tb\tc\td\te\tf\tx\ty\t{score}\n" for i, score in
                 enumerate(["0", "nan", "inf", "-7", "5.0", "5.5"]))
  _write(str(tmp_path), {"train.tsv": header + rows})
  stats = glue_data.ReadStats()
  kept = glue_data.read_examples("sts-b", str(tmp_path), "train",
                                 skip_malformed=True, stats=stats)
  assert [e.label for e in kept] == [0.0, 5.0]
  assert stats.skipped == 4 and stats.examples_of_skips[0].endswith(
      "train.tsv:3: score 'nan' is not a number from 0.0 to 5.0")
  with pytest.raises(glue_data.GlueFormatError,
                     match=r"dev.tsv:1: header lacks column"):
    glue_data.read_examples("sts-b", str(tmp_path), "dev")
  with pytest.raises(FileNotFoundError, match="test.tsv"):
    glue_data.read_examples("sts-b", str(tmp_path), "test")


def test_features_use_shared_tokenizer_and_cache(tokenizer, tmp_path):
  _write(str(tmp_path), FILES["mrpc"])
  examples = glue_data.read_examples("mrpc", str(tmp_path), "train")
  feats = list(glue_data.convert_examples(examples, "mrpc", tokenizer, 16))
  f = feats[0]
  a = tokenizer.encode_ids(examples[0].text_a)
  b = tokenizer.encode_ids(examples[0].text_b)
  ta, tb = finetune_features.truncate_pair(a, b, 13)
  assert f["input_word_ids"] == ([tokenizer.cls_id] + ta + [tokenizer.sep_id]
                                 + tb + [tokenizer.sep_id])
  assert f["input_type_ids"] == [0] * (len(ta) + 2) + [1] * (len(tb) + 1)
  assert sum(f["input_mask"]) == 16 and f["label_ids"] == [1]
  # Written to TFRecords and read back unchanged.
  path = str(tmp_path / "cache" / "mrpc.tf_record")
  calls = []

  def build(out):
    calls.append(out)
    finetune_features.write_records(out, iter(feats))

  _, meta = finetune_features.cached_records(path, build)
  _, meta2 = finetune_features.cached_records(path, build)
  assert meta == meta2 == {"num_records": 1} and len(calls) == 1
  ds = finetune_features.decoded_records(path, glue_data.feature_spec(
      "mrpc", 16))
  row = next(iter(ds))
  np.testing.assert_array_equal(row["input_word_ids"], f["input_word_ids"])
  assert int(row["label_ids"]) == 1


def test_submission_files(tmp_path):
  _write(str(tmp_path), FILES["mnli"])
  examples = glue_data.read_examples("mnli", str(tmp_path), "test")
  path = glue_data.write_submission("mnli", "test", examples, [1],
                                    str(tmp_path / "out"))
  assert os.path.basename(path) == "MNLI-m.tsv"
  with open(path) as f:
    assert f.read() == "index\tprediction\n0\tentailment\n"
  path = glue_data.write_submission("sts-b", "test", examples, [5.7],
                                    str(tmp_path / "out"))
  with open(path) as f:
    assert f.read() == "index\tprediction\n0\t5.000\n"  # clipped to [0, 5]


def test_official_recipes_load():
  """The fine-tuning recipes (official_configs/finetuning/*.yaml, a link to
  the package's albert_tf/configs) load over a model file and carry the
  original's per-task hyperparameters."""
  from albert_tf.core import experiment_config  # pylint: disable=g-import-not-at-top
  from albert_tf.modeling import albert_config  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks import multiple_choice  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks import question_answering  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks import sentence_prediction  # pylint: disable=g-import-not-at-top
  from albert_tf.tasks import tagging  # pylint: disable=g-import-not-at-top
  config_classes = {"glue": sentence_prediction.GlueExperimentConfig,
                    "squad": question_answering.SquadExperimentConfig,
                    "race": multiple_choice.RaceExperimentConfig,
                    "conll2003": tagging.TaggingExperimentConfig}
  root = albert_config.CONFIG_DIR
  names = sorted(os.listdir(os.path.join(root, "finetuning")))
  assert len(names) == 14
  loaded = {}
  for name in names:
    config_cls = config_classes[name.split("_")[0].split(".")[0]]
    loaded[name[:-5]] = experiment_config.load_experiment_config(
        config_cls, [os.path.join(root, "models", "albert_base_v2.yaml"),
         os.path.join(root, "finetuning", name)])
  mnli = loaded["glue_mnli"]
  assert (mnli.optimizer.learning_rate, mnli.data.global_batch_size,
          mnli.trainer.train_steps, mnli.optimizer.num_warmup_steps,
          mnli.data.max_seq_length) == (3e-5, 128, 10000, 1000, 512)
  assert mnli.model.hidden_size == 768  # the model file is kept
  squad = loaded["squad_v1.1"]
  assert (squad.data.doc_stride, squad.data.max_query_length,
          squad.data.n_best_size, squad.data.max_answer_length,
          squad.data.max_seq_length) == (128, 64, 20, 30, 384)
  assert loaded["squad_v2.0"].task.squad_head == "xlnet"
  assert loaded["race"].model.hidden_dropout_prob == 0.0  # v2 (race_v1: 0.1)
  for name, config in loaded.items():
    if name.startswith("glue_"):
      assert glue_data.get_task(config.data.task_name)


def test_bytes_that_are_not_utf8_name_the_line(tmp_path):
  """A Latin-1 row raised a codec error naming neither file nor line."""
  with open(tmp_path / "train.tsv", "wb") as f:
    f.write(b"\xef\xbb\xbfsentence\tlabel\nfine\t1\ncaf\xe9 bad\t0\n"
            b"good\t0\n")
  path = os.path.join(str(tmp_path), "train.tsv")
  with pytest.raises(glue_data.GlueFormatError) as e:
    glue_data.read_examples("sst-2", str(tmp_path), "train")
  assert str(e.value).startswith(f"{path}:3: not UTF-8 (byte 0xe9)")
  stats = glue_data.ReadStats()
  examples = glue_data.read_examples("sst-2", str(tmp_path), "train",
                                     skip_malformed=True, stats=stats)
  assert [e.text_a for e in examples] == ["fine", "good"]
  assert stats.skipped == 1
