"""The lab's tiny vLLM models, made offline with a fixed seed (run at image build time, see Dockerfile).

Writes OUT/target: a byte-level BPE tokenizer (vocab 2048) trained on the docstrings of Python's standard library
modules (the same text on every build of the same base image) and a 2-layer LlamaForCausalLM (hidden 256, 4 heads,
bfloat16, 4.7 MB) whose weights come from torch.manual_seed(0); OUT/draft: a byte-for-byte copy of the target
(a draft equal to the target: at temperature 0 every drafted token is accepted, so the lab's acceptance is exact).
OUT/SHA256SUMS lists every file. Nothing here is a useful language model: it is a real model that vLLM loads and
runs, for real speculative decoding with real counters on a CPU. Never downloads anything.
"""

import hashlib
import importlib
import os
import shutil
import sys

import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

MODULES = ("os", "re", "json", "string", "textwrap", "collections", "functools", "itertools", "pathlib", "argparse",
           "logging", "subprocess", "socket", "http.client", "email.message", "csv", "datetime", "decimal",
           "fractions", "statistics", "random", "heapq", "bisect", "shutil", "tempfile", "zipfile", "tarfile",
           "threading", "queue", "asyncio.tasks", "unittest.case", "doctest", "inspect", "dataclasses")


def corpus(path):
    """Docstrings of the standard library modules above (and of their public callables), in a fixed order."""
    parts = []
    for name in MODULES:
        mod = importlib.import_module(name)
        parts.append(mod.__doc__ or "")
        for attr in sorted(dir(mod)):
            doc = getattr(getattr(mod, attr, None), "__doc__", None)
            if not attr.startswith("_") and callable(getattr(mod, attr, None)) and isinstance(doc, str):
                parts.append(doc)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n\n".join(parts))


def main(out):
    target = os.path.join(out, "target")
    os.makedirs(target, exist_ok=True)
    text = os.path.join(out, "corpus.txt")
    corpus(text)
    tok = ByteLevelBPETokenizer()
    tok.train(files=[text], vocab_size=2048, min_frequency=2, special_tokens=["<s>", "</s>", "<unk>", "<pad>"],
              show_progress=False)
    os.remove(text)
    tok.save(os.path.join(target, "tokenizer.json"))
    fast = PreTrainedTokenizerFast(tokenizer_file=os.path.join(target, "tokenizer.json"), bos_token="<s>",
                                   eos_token="</s>", unk_token="<unk>", pad_token="<pad>")
    # A chat template, so that /v1/chat/completions works: the messages' contents, one per line.
    fast.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    fast.save_pretrained(target)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(fast), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=1024,
                      bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                      pad_token_id=fast.pad_token_id, torch_dtype="bfloat16")
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(target)
    draft = os.path.join(out, "draft")
    shutil.rmtree(draft, ignore_errors=True)
    shutil.copytree(target, draft)
    lines = []
    for sub in ("target", "draft"):
        for name in sorted(os.listdir(os.path.join(out, sub))):
            with open(os.path.join(out, sub, name), "rb") as f:
                lines.append("%s  %s/%s" % (hashlib.sha256(f.read()).hexdigest(), sub, name))
    with open(os.path.join(out, "SHA256SUMS"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
