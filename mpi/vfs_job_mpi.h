/*
 * vfs_job_mpi.h — libversionfs-mpi: a job checkpoint of the versionfs
 * mounts of every node of an MPI job, taken from inside the job
 * (vfs_job_checkpoint(3), versionfs-job(8)).
 *
 * For MPI programs that write their own restart files: call it
 * collectively once they are written (every rank, the same arguments):
 *
 *     write_my_restart_files(step);            // every rank
 *     uint64_t jc;
 *     char err[512];
 *     if (vfs_job_checkpoint(MPI_COMM_WORLD, "step100", NULL, &jc, err,
 *                            sizeof(err)) != 0)
 *             ... no rank's files are protected by it: say err, go on ...
 *
 * After a barrier, one process per node checkpoints that node's mounts;
 * an allreduce decides: only when every node's checkpoint is durable is
 * the job record kept on every node, else the members taken are deleted.
 * Every rank gets the same result.  The job checkpoints are the same as
 * versionfs-job checkpoint's: `versionfs-job rollback` restores them.
 *
 * Link with -lversionfs-mpi -lversionfs (mpicc).  Not thread-safe with
 * respect to comm: like any collective, one call at a time per
 * communicator.
 */
#ifndef VFS_JOB_MPI_H
#define VFS_JOB_MPI_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Take a job checkpoint of the mounts (a NULL-terminated list of paths,
 * the same on every node; NULL: $VERSIONFS_JOB_MOUNTS, colon-separated)
 * of every node of comm, tagged `tag` (NULL: none).  The job is
 * $VERSIONFS_JOB_ID, else $SLURM_JOB_ID.  A node's index (its place in
 * the job's node list, which versionfs-job rollback must use too) is the
 * host's place in $VERSIONFS_JOB_NODES (comma-separated), else
 * $SLURM_NODEID, else the order of the nodes' first ranks in comm.
 *
 * Collective over comm.  Returns 0 and *id (may be NULL) the job
 * checkpoint id on every rank, or on every rank the same negative errno:
 *   -EINVAL   no job id or no mounts, a bad tag, inconsistent node indexes
 *   -EIO      a node's checkpoint failed: no job checkpoint recorded
 *             (err names the node and why; the members taken were
 *             deleted where the daemon answered)
 *   -EREMOTEIO  MPI failed
 * err (may be NULL) receives a message on every rank.
 */
int vfs_job_checkpoint(MPI_Comm comm, const char *tag,
		       const char *const *mounts, uint64_t *id, char *err,
		       size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* VFS_JOB_MPI_H */
