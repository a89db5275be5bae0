# LoRA SFT of SmolLM2-135M-Instruct on GSM8K: only the adapters train; checkpoints merge them back with
#   python -m verl.model_merger merge --backend fsdp --local_dir <save_path>/global_step_N --target_dir <hf_dir>
# Data: python3 examples/data_preprocess/gsm8k.py --local_save_dir ~/data/gsm8k
set -x

if [ "$#" -lt 2 ]; then
    echo "Usage: run_smollm2_sft_peft.sh <nproc_per_node> <save_path> [other_configs...]"
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
    model.lora_rank=32 \
    model.lora_alpha=16 \
    model.target_modules=all-linear \
    use_remove_padding=True \
    optim.lr=1e-4 \
    trainer.default_local_dir=$save_path \
    trainer.project_name=gsm8k-sft \
    trainer.experiment_name=gsm8k-sft-smollm2-135m-lora32 \
    trainer.logger='["console","file"]' \
    trainer.total_epochs=1 "$@"
