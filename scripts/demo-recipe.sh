# The demo's pretraining recipe, sourced by scripts/demo.sh and scripts/time-to-train.sh so that
# both run the same command. BERT-tiny (L2 H128 A2 I512), seq 128, batch 32, LAMB lr 1e-2 with 30
# warm-up steps and poly decay over STEPS, an evaluation every 3,200 samples on 256 held-out
# examples, until the masked-LM accuracy reaches TARGET (docs/pretraining.md, "The demo";
# docs/time-to-train.md for what it reaches).
#   demo_recipe RECORDS TARGET STEPS THREADS  -> the array DEMO_RECIPE: pretrain's flags, without
#                                               --output_dir and --seed (the caller adds them)
# RECORDS: the directory `bertbench prepare` filled (train-*.tfrecord, eval.tfrecord).
demo_recipe() {
  local records=$1 target=$2 steps=$3 threads=$4
  DEMO_RECIPE=(--model=tiny
    --input_file="$records/train-*.tfrecord" --eval_input_file="$records/eval.tfrecord"
    --train_batch_size=32 --max_seq_length=128 --max_predictions_per_seq=20
    --optimizer=lamb --learning_rate=1e-2 --num_warmup_steps=30 --num_train_steps="$steps"
    --eval_every_samples=3200 --eval_batch_size=32 --max_eval_steps=8
    --target_mlm_accuracy="$target" --save_checkpoints_steps=200 --keep_checkpoint_max=2
    --threads="$threads")
}
