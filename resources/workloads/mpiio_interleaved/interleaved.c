/* Interleaved small transfers to one shared file with MPI-IO, the way IOR's MPIIO backend
 * does them (ior -a MPIIO -c -t 4k -b 4k -s SEGMENTS): in segment s, rank r writes (then reads
 * back) one transfer at offset (s * nranks + r) * xfer, with collective calls by default.
 *
 * Hints reach MPI_File_open the way IOR passes them: every IOR_HINT__MPI__<key>=<value>
 * environment variable becomes an MPI_Info key, and ROMIO adds what a ROMIO_HINTS file says
 * for keys the program did not set.  --pin key=value sets a hint after all of them (a value
 * hard-coded in a program's source), so a tuner's hint for that key never takes effect.
 *
 * --fsync 1 makes the written data durable before the file is closed (MPI_File_sync, like
 * IOR's -e), so the write phase's time includes getting it to the device.
 *
 * --cold-read 1 evicts the file from the page cache between the phases (posix_fadvise), so the
 * reads reach the device as they would on nodes that did not write the file.
 *
 * Prints the time of each phase, the bytes moved and mismatched, and writes the hints in
 * effect (MPI_File_get_info) to DATA/hints-in-effect.txt.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;
#define PREFIX "IOR_HINT__MPI__"
#define MAX_PINS 16

static void die(const char *what, int err) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, msg, &len);
    fprintf(stderr, "interleaved: %s: %s\n", what, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

static void set_pair(MPI_Info info, const char *pair) {
    char key[MPI_MAX_INFO_KEY + 1];
    const char *eq = strchr(pair, '=');
    size_t n = eq ? (size_t)(eq - pair) : 0;
    if (!eq || n == 0 || n > MPI_MAX_INFO_KEY) {
        fprintf(stderr, "interleaved: not a key=value hint: %s\n", pair);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    memcpy(key, pair, n);
    key[n] = '\0';
    MPI_Info_set(info, key, eq + 1);
}

int main(int argc, char **argv) {
    const char *data = ".";
    long segments = 4096, xfer = 4096, per_call = 1;
    int collective = 1, fsync_after = 0, cold = 0, npins = 0;
    const char *pins[MAX_PINS];
    MPI_Init(&argc, &argv);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--data")) data = argv[i + 1];
        else if (!strcmp(argv[i], "--segments")) segments = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--xfer")) xfer = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--per-call")) per_call = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--collective")) collective = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--fsync")) fsync_after = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--cold-read")) cold = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--pin") && npins < MAX_PINS) pins[npins++] = argv[i + 1];
        else {
            fprintf(stderr, "usage: interleaved --data DIR [--segments N] [--xfer BYTES] [--per-call N] "
                            "[--collective 0|1] [--fsync 0|1] [--cold-read 0|1] [--pin key=value]...\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    MPI_Info info;
    MPI_Info_create(&info);
    for (char **e = environ; *e; e++)
        if (!strncmp(*e, PREFIX, strlen(PREFIX))) set_pair(info, *e + strlen(PREFIX));
    for (int i = 0; i < npins; i++) set_pair(info, pins[i]);

    char path[4096];
    snprintf(path, sizeof path, "%s/shared.dat", data);
    if (per_call < 1 || segments % per_call) {
        fprintf(stderr, "interleaved: --per-call must divide --segments\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    /* several transfers per call: a file view of this rank's interleaved transfers (a strided
     * vector), so one call moves per_call noncontiguous pieces; offsets count this rank's bytes */
    MPI_Datatype view, strided;
    MPI_Type_vector((int)per_call, (int)xfer, (int)(xfer * nranks), MPI_BYTE, &strided);
    MPI_Type_create_resized(strided, 0, (MPI_Aint)(xfer * nranks * per_call), &view);
    MPI_Type_commit(&view);
    MPI_Type_free(&strided);
    char *buf = malloc((size_t)(xfer * per_call)), *back = malloc((size_t)(xfer * per_call));
    MPI_File fh;
    MPI_Status st;
    int err;
    double t0, write_s, read_s;

    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    err = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh);
    if (err != MPI_SUCCESS) die("open for writing", err);
    if (per_call > 1) MPI_File_set_view(fh, (MPI_Offset)rank * xfer, MPI_BYTE, view, "native", info);
    for (long s = 0; s < segments; s += per_call) {
        for (long k = 0; k < per_call; k++)
            memset(buf + k * xfer, (int)(((s + k) * nranks + rank) % 251), (size_t)xfer);
        MPI_Offset off = per_call > 1 ? (MPI_Offset)s * xfer : (MPI_Offset)(s * nranks + rank) * xfer;
        int n = (int)(xfer * per_call);
        err = collective ? MPI_File_write_at_all(fh, off, buf, n, MPI_BYTE, &st)
                         : MPI_File_write_at(fh, off, buf, n, MPI_BYTE, &st);
        if (err != MPI_SUCCESS) die("write", err);
    }
    if (fsync_after && (err = MPI_File_sync(fh)) != MPI_SUCCESS) die("sync", err); /* like ior -e */
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    write_s = MPI_Wtime() - t0;

    if (cold && rank == 0) { /* the read phase finds nothing cached, as on nodes that did not write it */
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            fdatasync(fd);
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            close(fd);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    long mismatched = 0;
    t0 = MPI_Wtime();
    err = MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_RDONLY, info, &fh);
    if (err != MPI_SUCCESS) die("open for reading", err);
    MPI_Info in_effect;
    MPI_File_get_info(fh, &in_effect);
    if (per_call > 1) MPI_File_set_view(fh, (MPI_Offset)rank * xfer, MPI_BYTE, view, "native", info);
    for (long s = 0; s < segments; s += per_call) {
        MPI_Offset off = per_call > 1 ? (MPI_Offset)s * xfer : (MPI_Offset)(s * nranks + rank) * xfer;
        int n = (int)(xfer * per_call);
        err = collective ? MPI_File_read_at_all(fh, off, back, n, MPI_BYTE, &st)
                         : MPI_File_read_at(fh, off, back, n, MPI_BYTE, &st);
        if (err != MPI_SUCCESS) die("read", err);
        for (long k = 0; k < per_call; k++)
            for (long b = 0; b < xfer; b++)
                mismatched += back[k * xfer + b] != (char)(((s + k) * nranks + rank) % 251);
    }
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    read_s = MPI_Wtime() - t0;

    long total = 0;
    MPI_Reduce(&mismatched, &total, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        snprintf(path, sizeof path, "%s/hints-in-effect.txt", data);
        FILE *out = fopen(path, "w");
        int nkeys = 0;
        MPI_Info_get_nkeys(in_effect, &nkeys);
        for (int i = 0; out && i < nkeys; i++) {
            char key[MPI_MAX_INFO_KEY + 1], value[1024];
            int flag = 0;
            MPI_Info_get_nthkey(in_effect, i, key);
            MPI_Info_get(in_effect, key, sizeof value - 1, value, &flag);
            if (flag) fprintf(out, "%s %s\n", key, value);
        }
        if (out) fclose(out);
        long bytes = segments * nranks * xfer;
        printf("ranks %d segments %ld xfer %ld collective %d\n", nranks, segments, xfer, collective);
        printf("bytes_written %ld bytes_read %ld mismatched_bytes %ld\n", bytes, bytes, total);
        printf("write_time_s %.6f\nread_time_s %.6f\n", write_s, read_s);
    }
    MPI_Type_free(&view);
    MPI_Info_free(&in_effect);
    MPI_Info_free(&info);
    free(buf);
    free(back);
    MPI_Finalize();
    return 0;
}
