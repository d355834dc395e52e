"""A small PyTorch serving engine with a paged KV cache, checked by kvcanary (see
``examples/torch_engine.py`` and ``docs/torch_engine.md``)."""
