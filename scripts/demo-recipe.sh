# The demo's pretraining recipe, sourced by scripts/demo.sh and scripts/time-to-train.sh so that
# both make the same data and run the same command (docs/time-to-train.md says why each choice):
#   - the vocabulary: bert-base-uncased's 30,522 pieces cut to the 4,096 the Brown training text
#     uses most (scripts/corpus-vocab.py), so the output layer is cheap and every piece is seen often;
#   - records of 32 tokens with 40 % of the pieces masked (up to 13 per sequence) for training, and
#     the held-out Brown documents at 32 tokens with BERT's 15 % for the evaluation;
#   - BERT-tiny's shape (L2 H128 A2 I512) on that vocabulary, dropout 0, batch 32, LAMB lr 1e-2
#     with 100 warm-up steps and linear decay over STEPS, an evaluation every 12,800 samples on
#     2,048 held-out sequences, until the masked-LM accuracy reaches TARGET.
#   demo_records DATA OUT BB    -> OUT/vocab.txt, OUT/bert_config.json, OUT/train-*.tfrecord and
#                                  OUT/eval.tfrecord (kept when already made)
#   - the last layer's attention output and FFN on the rows the heads read only (--last_layer_subset:
#     the [CLS] rows and the masked ones, 448 of 1,024 per batch; the same model and gradients to
#     fp32 rounding, about 9 % less time per step on a Zen 3, docs/engine.md);
#   - bf16 GEMMs (fp32 accumulation and master weights) where they outrun fp32's (AMX, or AMD's
#     AVX512-BF16: about 1.4x the fp32 step on a Zen 4), fp32 elsewhere: where bf16 would be emulated,
#     and on Intel's AVX512-BF16 without AMX (0.65x the fp32 step; `bertbench version` says which).
#   demo_dtype BB                -> bf16 or fp32 on stdout, as above (from `BB version`)
#   demo_recipe RECORDS TARGET STEPS THREADS DTYPE  -> the array DEMO_RECIPE: pretrain's flags,
#                                  without --output_dir and --seed (the caller adds them)
DEMO_SEQ=32
DEMO_PREDICTIONS=13  # 40 % of 32, rounded up: the eval set must have the same per-sequence slots

demo_records() {
  local data=$1 out=$2 bb=$3
  mkdir -p "$out"
  if [[ ! -s "$out/vocab.txt" ]]; then
    cat "$data"/brown/train-*.txt | "$bb" tokenize --vocab_file="$data/vocab.txt" |
      /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/corpus-vocab.py" --vocab="$data/vocab.txt" \
        --size=4096 --out="$out/vocab.txt"
  fi
  cat >"$out/bert_config.json.tmp" <<'JSON'
{"vocab_size": 4096, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 512, "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
 "attention_probs_dropout_prob": 0.0, "max_position_embeddings": 512, "type_vocab_size": 2,
 "initializer_range": 0.02}
JSON
  mv "$out/bert_config.json.tmp" "$out/bert_config.json"
  local prep=("$bb" prepare --vocab_file="$out/vocab.txt" --do_lower_case --max_seq_length=$DEMO_SEQ
    --max_predictions_per_seq=$DEMO_PREDICTIONS --dupe_factor=5 --random_seed=12345)
  # Four training files from train-*.txt (written round-robin), and the held-out eval.txt at
  # BERT's 15 %, so that the metric is the usual masked-LM task. prepare renames each file into
  # place only when it is complete.
  local shards=() i
  for i in 0 1 2 3; do shards+=("$out/train-0000$i-of-00004.tfrecord"); done
  # The reference's log lines (example records) go to OUT/prepare.log.
  [[ -s "${shards[3]}" ]] || "${prep[@]}" --input_file="$data/brown/train-*.txt" \
    --output_file="$(IFS=,; echo "${shards[*]}")" --masked_lm_prob=0.4 --jobs=0 2>"$out/prepare.log" ||
    { tail -3 "$out/prepare.log" >&2; return 1; }
  [[ -s "$out/eval.tfrecord" ]] ||
    "${prep[@]}" --input_file="$data/brown/eval.txt" --output_file="$out/eval.tfrecord" --masked_lm_prob=0.15 \
      2>>"$out/prepare.log" || { tail -3 "$out/prepare.log" >&2; return 1; }
}

demo_dtype() {
  local info
  info=$("$1" version) || return 1
  if grep -q '"bf16_faster_than_fp32": true' <<<"$info"; then echo bf16; else echo fp32; fi
}

demo_recipe() {
  local records=$1 target=$2 steps=$3 threads=$4 dtype=$5
  DEMO_RECIPE=(--bert_config_file="$records/bert_config.json"
    --input_file="$records/train-*.tfrecord" --eval_input_file="$records/eval.tfrecord"
    --train_batch_size=32 --max_seq_length=$DEMO_SEQ --max_predictions_per_seq=$DEMO_PREDICTIONS
    --optimizer=lamb --learning_rate=1e-2 --num_warmup_steps=100 --num_train_steps="$steps"
    --eval_every_samples=12800 --eval_batch_size=128 --max_eval_steps=16
    --target_mlm_accuracy="$target" --save_checkpoints_steps=2000 --keep_checkpoint_max=2
    --dtype="$dtype" --threads="$threads" --last_layer_subset)
}
