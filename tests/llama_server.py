"""A llama.cpp HTTP server process for the writer's tests: `python llama_server.py MODEL.gguf PORT`.

llama.cpp's own server (its OpenAI-compatible `/v1/chat/completions`), run from the xllamacpp
wheel, so the tests need no llama.cpp build. Prints `listening URL` once it accepts requests and
serves until killed.
"""

import signal
import sys
import threading

import xllamacpp

params = xllamacpp.CommonParams()
params.model.path = sys.argv[1]
params.port = int(sys.argv[2])
params.n_ctx = 4096
params.n_parallel = 1
params.cpuparams.n_threads = 2
params.cpuparams_batch.n_threads = 2
params.warmup = True  # one empty decode at load, before "listening": the weights are paged in
server = xllamacpp.Server(params)
print("listening", server.listening_address, flush=True)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
stop.wait()
