"""Training recipe for the local judge's reader: a small cross-encoder over (question, passage) with
span heads (answer start/end, no-answer at the first token), an answerable head and an NLI head.

    python -m training.reader.data      # build the examples (seeded) into a cache
    python -m training.reader.train     # train, resumable from checkpoints
    python -m training.reader.export    # int8 ONNX + tokenizer into the package
    python -m training.reader.evaluate  # AUROC on held-out data, with a question-only baseline

Torch and transformers are needed here only; the shipped judge runs the ONNX file with onnxruntime.
"""
