"""What Bedrock Custom Model Import accepts, as data (checked before an import job spends money).

Source: Amazon Bedrock User Guide, "Import a customized model into Amazon Bedrock" (supported
architectures; importing a model source from Amazon S3: Hugging Face weights in ``.safetensors``,
``config.json``, tokenizer files) and "Invoke your imported model" (Converse is not available for
Qwen2.5, Qwen2-VL, Qwen2.5-VL and GPT-OSS). Re-check these tables when AWS adds architectures.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class ArchitectureRule:
    """One supported ``architectures[0]`` value from ``config.json``."""

    family: str
    max_total_bytes: int
    converse: bool = True


_TEXT_LIMIT = 200 * GIB  # text models
_MULTIMODAL_LIMIT = 100 * GIB  # vision-language models

#: ``config.json`` ``architectures[0]`` -> rule. Anything else is rejected before the import job.
SUPPORTED_ARCHITECTURES: dict[str, ArchitectureRule] = {
    "LlamaForCausalLM": ArchitectureRule("Llama", _TEXT_LIMIT),
    "MllamaForConditionalGeneration": ArchitectureRule("Llama 3.2 vision", _MULTIMODAL_LIMIT),
    "MistralForCausalLM": ArchitectureRule("Mistral", _TEXT_LIMIT),
    "MixtralForCausalLM": ArchitectureRule("Mixtral", _TEXT_LIMIT),
    "T5ForConditionalGeneration": ArchitectureRule("Flan", _TEXT_LIMIT),
    "GPTBigCodeForCausalLM": ArchitectureRule("GPTBigCode", _TEXT_LIMIT),
    "Qwen2ForCausalLM": ArchitectureRule("Qwen2 / Qwen2.5", _TEXT_LIMIT, converse=False),
    "Qwen3ForCausalLM": ArchitectureRule("Qwen3", _TEXT_LIMIT),
    "Qwen2VLForConditionalGeneration": ArchitectureRule("Qwen2-VL", _MULTIMODAL_LIMIT, converse=False),
    "Qwen2_5_VLForConditionalGeneration": ArchitectureRule("Qwen2.5-VL", _MULTIMODAL_LIMIT, converse=False),
    "GptOssForCausalLM": ArchitectureRule("GPT-OSS", _TEXT_LIMIT, converse=False),
}

CONFIG_FILE = "config.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
#: At least one of these must be present: a fast tokenizer or a SentencePiece model.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model")
WEIGHTS_SUFFIX = ".safetensors"
#: Weights in these formats are not imported; their presence usually means a conversion step was skipped.
UNSUPPORTED_WEIGHT_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".gguf")
#: config.json larger than this is not a Hugging Face config; refuse to read it into a Lambda.
MAX_CONFIG_BYTES = 1024 * 1024
