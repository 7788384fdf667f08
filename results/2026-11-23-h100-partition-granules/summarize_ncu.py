# Medians of the partitioned kernels' durations (Nsight Compute, gpu__time_duration.sum) per case,
# and the fraction of the read bandwidth (3101 GB/s, the last bench's) that 2^28 int32 samples
# read in that time would be. Prints ncu-summary.csv's rows.
import csv,os,sys,statistics
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
for tag,dists in [('before',['uniform','single','loguniform']),('pass2',None),('staged',None),('final',None),('rejected-ballot-rank',None)]:
    dists=dists or ['uniform','geometric','single','sorted','loguniform']
    for b in ['1048576','16777216']:
        runs=load(f'{here}/ncu-{tag}-{b}.csv'); per=len(runs)//len(dists)
        for i,dist in enumerate(dists):
            grp=runs[i*per:(i+1)*per]
            p=statistics.median(x['part'] for x in grp); s=statistics.median(x['scan'] for x in grp); bk=statistics.median(x['bucket'] for x in grp)
            tot=p+s+bk
            print(f"{tag},{b},{dist},{p:.0f},{s:.0f},{bk:.0f},{tot:.0f},{2**30/(3101e9*tot*1e-6):.3f}")
