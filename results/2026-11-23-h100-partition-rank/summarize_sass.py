# Summarizes an Nsight Compute source page (--page source --csv --print-source sass): the share of
# executed instructions and of stall samples per opcode, and the stall reasons. Usage: summarize_sass.py FILE.csv
import csv,sys,collections,re
f=sys.argv[1]
rows=list(csv.reader(open(f)))
h=rows[1]; data=rows[2:]
ai=h.index('Source'); ei=h.index('Instructions Executed'); si=h.index('Warp Stall Sampling (All Samples)')
stalls=[i for i,c in enumerate(h) if c.startswith('stall_') and 'Not Issued' not in c]
tot=sum(int(r[ei]) for r in data if r[ei].isdigit())
totS=sum(int(r[si]) for r in data if r[si].isdigit())
print(f, 'instructions', tot, 'samples', totS)
byop=collections.Counter(); byS=collections.Counter()
for r in data:
    if not r[ei].isdigit(): continue
    op=r[ai].strip().split()[0]
    if op.startswith('@'): op=r[ai].strip().split()[1]
    op=op.split('.')[0]
    byop[op]+=int(r[ei]); byS[op]+=int(r[si])
for op,c in byop.most_common(25): print(f'  {op:10} {c/tot*100:5.1f}% instr  {byS[op]/totS*100:5.1f}% stall-samples')
st=collections.Counter()
for r in data:
    for i in stalls:
        if r[i].isdigit(): st[h[i]]+=int(r[i])
print('  stalls:', ', '.join(f'{k[6:]} {v/totS*100:.1f}%' for k,v in st.most_common(10)))
