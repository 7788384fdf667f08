# Medians of the partitioned kernels' durations (Nsight Compute, gpu__time_duration.sum), in µs,
# per case: pass 1 (partition_kernel), CUB's scan, pass 2 (bucket_histogram_kernel), their sum.
# "after-rank" is ../2026-11-23-h100-partition-rank/ (e49b7d2), the code before this folder's.
# Prints ncu-summary.csv's rows.
import csv,os,statistics
here=os.path.dirname(os.path.abspath(__file__))
def load(f):
    rows=[r for r in csv.reader(open(f)) if len(r)>10]
    h=rows[0]; ki=h.index('Kernel Name'); vi=h.index('Metric Value')
    out=[]; cur={}
    for r in rows[1:]:
        k=r[ki]; v=float(r[vi].replace(',',''))/1000
        name='part' if 'partition_kernel' in k else 'bucket' if 'bucket_histogram' in k else 'scan'
        cur[name]=cur.get(name,0)+v
        if name=='bucket': out.append(cur); cur={}
    return out
dists=['uniform','geometric','single','sorted','loguniform']
print('code,bins,distribution,pass1,scan,pass2,total')
for tag,path in [('after-rank',f'{here}/../2026-11-23-h100-partition-rank/ncu-after-{{b}}.csv'),
                 ('rejected-warp-ballots',f'{here}/ncu-rejected-warp-ballots-{{b}}.csv'),
                 ('columns',f'{here}/ncu-columns-{{b}}.csv')]:
    for b in ['1048576','16777216']:
        runs=load(path.format(b=b)); per=len(runs)//len(dists)
        for i,dist in enumerate(dists):
            grp=runs[i*per:(i+1)*per]
            p,s,k=(statistics.median(x[n] for x in grp) for n in ('part','scan','bucket'))
            print(f"{tag},{b},{dist},{p:.0f},{s:.0f},{k:.0f},{p+s+k:.0f}")
