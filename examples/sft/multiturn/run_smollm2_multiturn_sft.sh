# Multi-turn SFT of SmolLM2-135M-Instruct: the loss covers every assistant turn (content + <|im_end|>) only.
# Data: python3 examples/data_preprocess/gsm8k.py --local_save_dir ~/data/gsm8k
#       python3 examples/sft/multiturn/prepare_gsm8k_chats.py --gsm8k_dir ~/data/gsm8k --local_save_dir ~/data/gsm8k_chats
set -x

if [ "$#" -lt 2 ]; then
    echo "Usage: run_smollm2_multiturn_sft.sh <nproc_per_node> <save_path> [other_configs...]"
    exit 1
fi

nproc_per_node=$1
save_path=$2
shift 2

torchrun --standalone --nnodes=1 --nproc_per_node=$nproc_per_node \
    -m verl.trainer.fsdp_sft_trainer \
    data.train_files=$HOME/data/gsm8k_chats/train.parquet \
    data.val_files=$HOME/data/gsm8k_chats/test.parquet \
    data.multiturn.enable=true \
    data.multiturn.messages_key=messages \
    data.train_batch_size=64 \
    data.micro_batch_size_per_gpu=4 \
    data.max_length=640 \
    data.truncation=right \
    model.partial_pretrain=default \
    use_remove_padding=True \
    optim.lr=2e-5 \
    trainer.default_local_dir=$save_path \
    trainer.project_name=multiturn-sft \
    trainer.experiment_name=multiturn-sft-smollm2-135m \
    trainer.logger='["console","file"]' \
    trainer.total_epochs=1 \
    trainer.test_freq=50 "$@"
