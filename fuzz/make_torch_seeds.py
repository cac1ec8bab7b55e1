# Seeds for fuzz/torch_checkpoint_fuzz.cpp, written by the system torch (python3-torch):
#   /usr/bin/python3 fuzz/make_torch_seeds.py fuzz/corpus/torch_checkpoint
# Small on purpose: a zip state dict (fp16, bf16, a shared storage with two views, a transposed
# view), the same in the legacy format, NVIDIA's dict (model, optimizer, master params, epoch) in
# the legacy format, and a bare protocol-2 object pickle (the VM alone).
import collections
import io
import os
import pickle
import sys

import torch

out = sys.argv[1]
torch.manual_seed(3)
base = torch.arange(6, dtype=torch.float32)
sd = collections.OrderedDict()
sd['bert.embeddings.word_embeddings.weight'] = torch.randn(2, 2).half()
sd['bert.encoder.layer.0.intermediate.dense_act.weight'] = torch.randn(2, 3).to(torch.bfloat16)
sd['a'] = base[1:3]
sd['b'] = base[2:6].view(2, 2).t()
torch.save(sd, os.path.join(out, 'state_dict_zip.pt'))
torch.save(sd, os.path.join(out, 'state_dict_legacy.pt'), _use_new_zipfile_serialization=False)
nv = {'model': sd, 'optimizer': {'state': {0: {'step': 1, 'exp_avg': torch.zeros(2)}},
                                 'param_groups': [{'lr': 0.1, 'params': [0]}]},
      'master params': [torch.ones(2)], 'files': [0, 'f.hdf5'], 'epoch': 2, 'data_loader': None}
torch.save(nv, os.path.join(out, 'nvidia_legacy.pt'), _use_new_zipfile_serialization=False)
with open(os.path.join(out, 'plain.pkl'), 'wb') as f:
    pickle.dump({'x': [1, -2, 3.5, 'é', b'\x00', (None, True, 2 ** 70)], 'y': {}}, f, protocol=2)
