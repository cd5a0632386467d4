"""The Pathways paper's Figure 2, with `pw` replaced by `causeway` and
`jax.pmap` by `causeway.pmap`: three functions, each on its own 2-device
slice, traced as one program graph. Prints (array([3., 5.]), array([2., 4.])).

    .venv/bin/python examples/python/figure2.py
    .venv/bin/python examples/python/figure2.py --cluster HOST:PORT [--token-file F]
"""
import argparse

import numpy

import causeway

parser = argparse.ArgumentParser(description="The Pathways paper's Figure 2 on Causeway.")
parser.add_argument("--cluster", metavar="HOST:PORT", help="a running head (default: embedded)")
parser.add_argument("--token-file", help="the file holding the cluster's token")
args = parser.parse_args()
if args.cluster:
  causeway.connect(args.cluster, token_file=args.token_file)
else:
  causeway.connect(islands=3, devices_per_host=2)


def get_devices(n):
  """Allocates `n` virtual TPU devices on an island."""
  device_set = causeway.make_virtual_device_set()
  return device_set.add_slice(tpu_devices=n).tpus

a = causeway.pmap(lambda x: x * 2., devices=get_devices(2))
b = causeway.pmap(lambda x: x + 1., devices=get_devices(2))
c = causeway.pmap(lambda x: x / 2., devices=get_devices(2))

@causeway.program  # Program tracing (optional)
def f(v):
  x = a(v)
  y = b(x)
  z = a(c(x))
  return (y, z)

print(f(numpy.array([1., 2.])))
