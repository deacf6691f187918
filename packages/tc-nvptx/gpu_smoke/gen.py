import json, tc_nvptx
from tc_opt import CompileOptions
import os; os.chdir(os.path.dirname(os.path.abspath(__file__))); K = '../../tc-lang/tests/kernels/'
ADD = open('/tmp/add.tc').read()
jobs = {
 'add_f32': (ADD, {'TYPE':'float','BLOCK':1024}, None),
 'add_f16': (ADD, {'TYPE':'half','BLOCK':1024}, None),
 'add_f32_spec': (ADD, {'TYPE':'float','BLOCK':1024}, ('divisible_by_16',)*3+(None,)),
 'softmax': (open(K+'softmax.tc').read(), {'BLOCK':1024}, None),
 'softmax64': (open(K+'softmax.tc').read(), {'BLOCK':64}, None),
 'transpose': (open(K+'transpose_masked.tc').read(), {'TYPE':'float','TM':32,'TN':32}, None),
 'matmul': (open(K+'matmul.tc').read(), {'TYPE':'float','TM':32,'TN':32,'TK':8}, None),
}
for name, (src, d, spec) in jobs.items():
    k = tc_nvptx.compile(src, defines=d, options=CompileOptions(arch='sm_90', specialization=spec))
    open(name + '.cubin', 'wb').write(k.cubin)
    meta = k.to_json(); json.dump(meta, open(name + '.json', 'w'))
    print(name, meta)
