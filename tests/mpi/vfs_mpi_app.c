/*
 * vfs_mpi_app.c — the MPI job of t0955-job-mpi: every rank appends to and
 * rewrites node-local files step by step and checkpoints itself through
 * vfs_job_checkpoint(3) every few steps, as an application with its own
 * restart files does.
 *
 *   vfs_mpi_app DIR LAST EVERY [CRASH]
 *
 * Rank r works in DIR/r<r>/: log.txt (appended every step), data.bin
 * (pages rewritten in place), step-<s>.dat (one per step), state (the
 * last step done, rewritten through a rename).  It resumes after the step
 * its state file names (the restart: after versionfs-job rollback, the
 * state file is the one of the job checkpoint).  Every EVERY steps, once
 * every rank wrote its step, the ranks take a job checkpoint tagged
 * "step<s>"; rank 0 prints "jobckpt S ID MICROSECONDS" (the call's time).
 * A negative EVERY is the baseline of bench/job.sh instead: every -EVERY
 * steps a barrier, rank 0 alone checkpoints the first mount of
 * $VERSIONFS_JOB_MOUNTS (the node's local checkpoint, the same files
 * dirty), and a broadcast of its result; rank 0 prints "localckpt S ID
 * MICROSECONDS" (one node only: the others' mounts are not checkpointed).
 * With CRASH, every rank stops
 * dead in the middle of step CRASH (half of its files written).  Exit
 * 0, or 1 with a message.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "mpi/vfs_job_mpi.h"
#include "versionfs/lib/client.h"

static void die(int rank, const char *what)
{
	fprintf(stderr, "vfs_mpi_app: rank %d: %s: %s\n", rank, what,
		strerror(errno));
	MPI_Abort(MPI_COMM_WORLD, 1);
}

static void put_file(int rank, const char *path, const char *buf, size_t n,
		     int flags, off_t off)
{
	int fd = open(path, O_WRONLY | O_CREAT | flags, 0644);

	if (fd < 0 || pwrite(fd, buf, n, off) != (ssize_t)n || close(fd))
		die(rank, path);
}

int main(int argc, char **argv)
{
	char dir[4096], path[4200], buf[65536], err[512];
	int rank, last, every, crash, s = 0;
	FILE *f;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (argc < 4) {
		fprintf(stderr, "usage: vfs_mpi_app DIR LAST EVERY [CRASH]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	last = atoi(argv[2]);
	every = atoi(argv[3]);
	crash = argc > 4 ? atoi(argv[4]) : 0;
	snprintf(dir, sizeof(dir), "%s/r%d", argv[1], rank);
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/state", dir);
	if ((f = fopen(path, "r"))) {
		if (fscanf(f, "%d", &s) != 1)
			s = 0;
		fclose(f);
	}
	for (s++; s <= last; s++) {
		size_t n = 5000 + (size_t)(s * 613 + rank * 37) % 30000;
		int len;

		for (size_t i = 0; i < n; i++)
			buf[i] = (char)('a' + (i * 7 + (size_t)s + (size_t)rank)
					% 26);
		snprintf(path, sizeof(path), "%s/step-%d.dat", dir, s);
		put_file(rank, path, buf, n, O_TRUNC, 0);
		len = snprintf(buf, sizeof(buf), "rank %d step %d begins\n",
			       rank, s);
		snprintf(path, sizeof(path), "%s/log.txt", dir);
		put_file(rank, path, buf, (size_t)len, O_APPEND, 0);
		if (s == crash) {
			/* dead in the middle of the step */
			fprintf(stderr, "vfs_mpi_app: rank %d crashes in step "
				"%d\n", rank, s);
			_exit(3);
		}
		memset(buf, 'A' + s % 26, 4096);
		snprintf(path, sizeof(path), "%s/data.bin", dir);
		put_file(rank, path, buf, 4096, 0, (off_t)(s % 7) * 4096);
		len = snprintf(buf, sizeof(buf), "rank %d step %d ends\n",
			       rank, s);
		snprintf(path, sizeof(path), "%s/log.txt", dir);
		put_file(rank, path, buf, (size_t)len, O_APPEND, 0);
		len = snprintf(buf, sizeof(buf), "%d\n", s);
		snprintf(path, sizeof(path), "%s/state.tmp", dir);
		put_file(rank, path, buf, (size_t)len, O_TRUNC, 0);
		{
			char to[4200];

			snprintf(to, sizeof(to), "%s/state", dir);
			if (rename(path, to))
				die(rank, "rename state");
		}
		if (every < 0 && s % -every == 0) {
			double t0, t1;
			uint64_t lid = 0;
			char m[4096], lerr[256];

			t0 = MPI_Wtime();
			MPI_Barrier(MPI_COMM_WORLD);
			if (!rank) {
				snprintf(m, sizeof(m), "%s",
					 getenv("VERSIONFS_JOB_MOUNTS") ?
					 getenv("VERSIONFS_JOB_MOUNTS") : "");
				m[strcspn(m, ":")] = 0;
				if (vfs_checkpoint_path(m, NULL, &lid, lerr,
							sizeof(lerr)))
					lid = 0;
			}
			MPI_Bcast(&lid, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
			t1 = MPI_Wtime();
			if (!lid) {
				if (!rank)
					fprintf(stderr, "vfs_mpi_app: local "
						"checkpoint at step %d failed"
						"\n", s);
				MPI_Finalize();
				return 1;
			}
			if (!rank)
				printf("localckpt %d %" PRIu64 " %.0f\n", s,
				       lid, (t1 - t0) * 1e6);
			fflush(stdout);
		}
		if (every > 0 && s % every == 0) {
			char tag[32];
			double t0, t1;
			uint64_t id;
			int rc;

			snprintf(tag, sizeof(tag), "step%d", s);
			t0 = MPI_Wtime();
			rc = vfs_job_checkpoint(MPI_COMM_WORLD, tag, NULL, &id,
						err, sizeof(err));
			t1 = MPI_Wtime();
			if (rc) {
				if (!rank)
					fprintf(stderr, "vfs_mpi_app: job "
						"checkpoint at step %d: %s\n",
						s, err);
				MPI_Finalize();
				return 1;
			}
			if (!rank)
				printf("jobckpt %d %" PRIu64 " %.0f\n", s, id,
				       (t1 - t0) * 1e6);
			fflush(stdout);
		}
	}
	MPI_Finalize();
	return 0;
}
