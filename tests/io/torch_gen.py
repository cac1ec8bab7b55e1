# PyTorch checkpoints for tests/io/torch_checkpoint_test.cpp and the fuzz seeds, written by the
# system torch (python3-torch) in both of torch.save's formats: zip (torch >= 1.6) and legacy
# (_use_new_zipfile_serialization=False, the format of torch <= 1.5).
# usage: torch_gen.py OUTDIR [MARKER]
#   OUTDIR/<case>_<zip|legacy>.pt for each case; OUTDIR/<case>.json (name, shape, dtype of each
#   state-dict tensor, in order) and OUTDIR/<case>.f32 (every float tensor as contiguous fp32,
#   concatenated in that order: t.float().contiguous().numpy().tobytes()); the evil_* files carry
#   a __reduce__ that would create MARKER if anything ran it.
import collections
import json
import os
import sys

import torch

out = sys.argv[1]
marker = sys.argv[2] if len(sys.argv) > 2 else os.path.join(out, 'PWNED')
torch.manual_seed(7)


def basic():
    sd = collections.OrderedDict()
    sd['f32'] = torch.randn(3, 4)
    sd['f16'] = torch.tensor([1.0, -2.5, 6.1e-5, 65504.0, float('inf'), 3e-8, 0.1],
                             dtype=torch.float16)
    sd['bf16'] = (torch.randn(2, 3) * 1e3).to(torch.bfloat16)
    sd['f64'] = torch.tensor([1.0 / 3, -1e-40, 2.0 ** 100], dtype=torch.float64)
    sd['scalar'] = torch.tensor(2.5)
    base = torch.arange(12, dtype=torch.float32) * 0.5  # one storage, two views at offsets
    sd['view_a'] = base[2:5]
    sd['view_b'] = base[4:10].view(2, 3)
    sd['transposed'] = torch.randn(3, 5).t()  # strides (1, 5)
    sd['param'] = torch.nn.Parameter(torch.randn(2, 2))
    sd['position_ids'] = torch.arange(4)
    sd['empty'] = torch.zeros(0, 3)
    return sd, sd


def nvidia(with_loader):
    H, I = 4, 8
    sd = collections.OrderedDict()
    sd['bert.embeddings.word_embeddings.weight'] = torch.randn(10, H).half()
    sd['bert.encoder.layer.0.intermediate.dense_act.weight'] = torch.randn(I, H)
    sd['bert.encoder.layer.0.intermediate.dense_act.bias'] = torch.randn(I)
    sd['cls.predictions.transform.dense_act.weight'] = torch.randn(H, H)
    sd['cls.predictions.bias'] = torch.randn(10)
    sd['cls.predictions.decoder.weight'] = sd['bert.embeddings.word_embeddings.weight']  # tied
    params = list(sd.values())[:2]
    opt = {'state': {0: {'step': 3, 'exp_avg': torch.zeros(10, H), 'exp_avg_sq': torch.ones(10, H)}},
           'param_groups': [{'lr': 1e-3, 'betas': (0.9, 0.999), 'eps': 1e-6,
                             'weight_decay': 0.01, 'params': [0, 1]}]}
    loader = None
    if with_loader:  # NVIDIA saves the train DataLoader in intermediate checkpoints
        ds = torch.utils.data.TensorDataset(torch.arange(6).view(3, 2))
        loader = torch.utils.data.DataLoader(ds, batch_size=2)
    obj = {'model': sd, 'optimizer': opt, 'master params': [p.float() for p in params],
           'files': [0, 'part-00000.hdf5'], 'epoch': 1, 'data_loader': loader}
    return obj, sd


class EvilSystem:
    def __reduce__(self):
        return (os.system, ('touch ' + marker,))


class EvilEval:
    def __reduce__(self):
        return (eval, ("open(%r, 'w').close()" % marker,))


cases = {'basic': basic(), 'nvidia': nvidia(False), 'nvidia_dl': nvidia(True),
         'evil_system': ({'a': torch.ones(2), 'b': EvilSystem()}, None),
         'evil_eval': (collections.OrderedDict(x=EvilEval()), None)}
for name, (obj, sd) in cases.items():
    torch.save(obj, os.path.join(out, name + '_zip.pt'))
    torch.save(obj, os.path.join(out, name + '_legacy.pt'), _use_new_zipfile_serialization=False)
    if name == 'basic':  # pickle protocols 4 and 5 put a FRAME before the legacy magic number
        for proto in (4, 5):
            torch.save(obj, os.path.join(out, '%s_legacy_p%d.pt' % (name, proto)),
                       _use_new_zipfile_serialization=False, pickle_protocol=proto)
    if sd is None:
        continue
    manifest, blob = [], b''
    for k, t in sd.items():
        manifest.append({'name': k, 'shape': list(t.shape), 'dtype': str(t.dtype)})
        if t.is_floating_point():
            blob += t.detach().float().contiguous().numpy().tobytes()
    with open(os.path.join(out, name + '.json'), 'w') as f:
        json.dump(manifest, f)
    with open(os.path.join(out, name + '.f32'), 'wb') as f:
        f.write(blob)
