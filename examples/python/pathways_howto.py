# The Pathways on Cloud how-to's first program, unchanged but for these
# comments: unmodified JAX through jaxlib's IFRT proxy client. Run it against
# `causeway cluster ... --proxy-listen HOST:PORT` with
#   JAX_PLATFORMS=proxy JAX_BACKEND_TARGET=grpc://HOST:PORT \
#   IFRT_PROXY_USE_INSECURE_GRPC_CREDENTIALS=true python pathways_howto.py
# (docs/jax.md; `make demo` does).
import jax
import jax.numpy as jnp
from jax import lax
import pathwaysutils
pathwaysutils.initialize()
devices = jax.devices()
print("Available devices:", len(devices))
num_tpus = jax.device_count()
x = jnp.arange(num_tpus)
def distributed_sum(value):
  return lax.psum(1, "devices")
calculate = jax.pmap(distributed_sum, axis_name="devices")
result = calculate(x)
print("Distributed result:", result)
