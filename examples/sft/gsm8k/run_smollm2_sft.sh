# SFT of the embedded SmolLM2-135M-Instruct on GSM8K's worked answers (prompt/response columns).
# Data: python3 examples/data_preprocess/gsm8k.py --local_save_dir ~/data/gsm8k
# Usage: bash examples/sft/gsm8k/run_smollm2_sft.sh <nproc_per_node> <save_path> [other overrides]
# On CPU the ranks use gloo; add trainer.device=cpu to be explicit.
set -x

if [ "$#" -lt 2 ]; then
    echo "Usage: run_smollm2_sft.sh <nproc_per_node> <save_path> [other_configs...]"
    exit 1
fi

nproc_per_node=$1
save_path=$2
shift 2

torchrun --standalone --nnodes=1 --nproc_per_node=$nproc_per_node \
    -m verl.trainer.fsdp_sft_trainer \
    data.train_files=$HOME/data/gsm8k/train.parquet \
    data.val_files=$HOME/data/gsm8k/test.parquet \
    data.prompt_key=extra_info \
    data.response_key=extra_info \
    "data.prompt_dict_keys=['question']" \
    "data.response_dict_keys=['answer']" \
    data.train_batch_size=64 \
    data.micro_batch_size_per_gpu=8 \
    data.max_length=512 \
    data.truncation=right \
    model.partial_pretrain=default \
    model.enable_gradient_checkpointing=True \
    use_remove_padding=True \
    optim.lr=2e-5 \
    trainer.default_local_dir=$save_path \
    trainer.project_name=gsm8k-sft \
    trainer.experiment_name=gsm8k-sft-smollm2-135m \
    trainer.logger='["console","file"]' \
    trainer.total_epochs=2 \
    trainer.test_freq=50 \
    trainer.save_freq=100 "$@"
