/*
 * statefile.c
 *		The state file in the data directory: the configuration snowseq
 *		issued under and the durable bound of every reservation.
 *
 * Two copies, snowseq.state and snowseq.state.copy, each written to a
 * temporary file, fsynced and durably renamed, the second after the first.
 * Both are durable before a bound is published, so either copy that
 * verifies bounds everything handed out.  This file only reads and writes:
 * what the state means is for its callers.
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "miscadmin.h"
#include "common/file_perm.h"
#include "port/pg_crc32c.h"
#include "storage/fd.h"
#include "utils/datetime.h"

#include "guc.h"
#include "statefile.h"
#include "timeutil.h"

#define SNOWSEQ_STATE_MAGIC		0x53455153	/* "SQES" */
#define SNOWSEQ_STATE_VERSION	2
#define SNOWSEQ_STATE_TMP		SNOWSEQ_STATE_FILE ".tmp"
#define SNOWSEQ_STATE_COPY_TMP	SNOWSEQ_STATE_COPY ".tmp"
/* far more slots than any configuration has: a bound on what is read */
#define SNOWSEQ_STATE_MAX_SLOTS 1000000

/* version 2: this header, nslots SavedSlots, a CRC-32C of all before it */
typedef struct StateHeader
{
	uint32		magic;
	uint32		version;
	SavedConfig config;
	uint32		nslots;
	uint32		pad;
} StateHeader;

/* version 1 (snowseq 1.0): the clock and the segment counter, fixed */
typedef struct StateV1
{
	uint32		magic;
	uint32		version;
	SavedConfig config;
	uint64		bound[2];
	uint64		block[2];
	pg_crc32c	crc;
} StateV1;

/* The configuration in force, as it is saved. */
void
StateConfigCurrent(SavedConfig *c)
{
	memset(c, 0, sizeof(*c));
	c->node_id = snowseq_node_id;
	c->time_bits = snowseq_time_bits;
	c->node_bits = snowseq_node_bits;
	c->seq_bits = snowseq_seq_bits;
	c->time_unit_ms = snowseq_time_unit_ms;
	c->seq_before_node = snowseq_seq_before_node ? 1 : 0;
	c->epoch_ms = SnowseqEpochMs;
}

/* Describe how a saved configuration differs from the one in force; false if equal. */
bool
StateConfigDiffers(const SavedConfig *c, char *buf, size_t len)
{
	if (c->time_bits != snowseq_time_bits || c->node_bits != snowseq_node_bits ||
		c->seq_bits != snowseq_seq_bits || c->time_unit_ms != snowseq_time_unit_ms)
		snprintf(buf, len,
				 "The layout was %d/%d/%d bits at %d ms and is now %d/%d/%d bits at %d ms.",
				 c->time_bits, c->node_bits, c->seq_bits, c->time_unit_ms,
				 snowseq_time_bits, snowseq_node_bits, snowseq_seq_bits, snowseq_time_unit_ms);
	else if (c->seq_before_node != (snowseq_seq_before_node ? 1 : 0))
		snprintf(buf, len, "The field order was %s and is now %s.",
				 c->seq_before_node ? "time, seq, node" : "time, node, seq",
				 snowseq_seq_before_node ? "time, seq, node" : "time, node, seq");
	else if (c->epoch_ms != SnowseqEpochMs)
	{
		/* timestamptz_to_str() returns a static buffer: copy the first */
		char		was[MAXDATELEN + 1];

		strlcpy(was, timestamptz_to_str(TimeMsToTimestamptz(c->epoch_ms)), sizeof(was));
		snprintf(buf, len, "snowseq.epoch was %s and is now %s.", was,
				 timestamptz_to_str(TimeMsToTimestamptz(SnowseqEpochMs)));
	}
	else if (c->node_id != snowseq_node_id)
		snprintf(buf, len, "snowseq.node_id was %d and is now %d.", c->node_id, snowseq_node_id);
	else
		return false;
	return true;
}

/*
 * A version 1 file as slots.  Its margins are what 1.0 applied after a
 * promotion: promote_margin_ms of logical time for the clock, one block
 * plus the blocks of the margin at the last rate for the segments.
 */
static void
StateFromV1(const StateV1 *v1, SavedState *s)
{
	const SavedConfig *c = &v1->config;
	uint64		seg_block = Max(v1->block[1], (uint64) snowseq_segment_block_min);

	s->config = *c;
	s->nslots = 2;
	s->slots = palloc0(2 * sizeof(SavedSlot));
	s->slots[0].tag = RESERVE_TAG_CLOCK;
	s->slots[0].bound = v1->bound[0];
	s->slots[0].block = v1->block[0];
	if (c->time_unit_ms > 0 && c->seq_bits >= 0 && c->seq_bits < 63)
		s->slots[0].margin = (uint64) (snowseq_promote_margin_ms / c->time_unit_ms) << c->seq_bits;
	s->slots[1].tag = RESERVE_TAG_SEGMENT;
	s->slots[1].bound = v1->bound[1];
	s->slots[1].block = v1->block[1];
	s->slots[1].margin = seg_block +
		seg_block * (uint64) snowseq_promote_margin_ms / (uint64) snowseq_reserve_buffer_ms;
}

/* Read a whole file into palloc'd memory; the number of bytes, or -1 with errno. */
static ssize_t
ReadWholeFile(const char *path, char **data)
{
	int			fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	struct stat st;
	ssize_t		n;

	*data = NULL;
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0)
	{
		int			save = errno;

		CloseTransientFile(fd);
		errno = save;
		return -1;
	}
	if (st.st_size > (off_t) (sizeof(StateHeader) + SNOWSEQ_STATE_MAX_SLOTS * sizeof(SavedSlot)))
	{
		CloseTransientFile(fd);
		errno = EFBIG;
		return -1;
	}
	*data = palloc(st.st_size + 1);
	n = read(fd, *data, st.st_size);
	if (n < 0)
	{
		int			save = errno;

		CloseTransientFile(fd);
		errno = save;
		return -1;
	}
	CloseTransientFile(fd);
	return n;
}

/*
 * Read and verify one copy of the state (either version); on corruption
 * say why in msg.  The slots are palloc'd.
 */
StateRead
StateReadFile(const char *path, SavedState *s, char *msg, size_t len)
{
	char	   *data;
	ssize_t		n = ReadWholeFile(path, &data);
	uint32		magic,
				version;
	pg_crc32c	crc,
				stored;

	memset(s, 0, sizeof(*s));
	if (n < 0)
	{
		if (errno == ENOENT)
			return STATE_READ_MISSING;
		snprintf(msg, len, "Could not read file \"%s\": %s.", path, strerror(errno));
		return STATE_READ_CORRUPT;
	}
	if (n < (ssize_t) (2 * sizeof(uint32) + sizeof(pg_crc32c)))
	{
		snprintf(msg, len, "The file has %lld bytes, too few for a state file.", (long long) n);
		return STATE_READ_CORRUPT;
	}
	memcpy(&magic, data, sizeof(uint32));
	memcpy(&version, data + sizeof(uint32), sizeof(uint32));
	if (magic != SNOWSEQ_STATE_MAGIC || (version != 1 && version != SNOWSEQ_STATE_VERSION))
	{
		snprintf(msg, len, "The file has magic %08x version %u, expected %08x version 1 or %u.",
				 magic, version, SNOWSEQ_STATE_MAGIC, SNOWSEQ_STATE_VERSION);
		return STATE_READ_CORRUPT;
	}
	if (version == 1)
	{
		StateV1		v1;

		if (n != sizeof(StateV1))
		{
			snprintf(msg, len, "The file has %lld bytes, expected %d.", (long long) n, (int) sizeof(StateV1));
			return STATE_READ_CORRUPT;
		}
		memcpy(&v1, data, sizeof(v1));
		INIT_CRC32C(crc);
		COMP_CRC32C(crc, &v1, offsetof(StateV1, crc));
		FIN_CRC32C(crc);
		if (!EQ_CRC32C(crc, v1.crc))
		{
			snprintf(msg, len, "The checksum is %08x, expected %08x.", v1.crc, crc);
			return STATE_READ_CORRUPT;
		}
		StateFromV1(&v1, s);
		pfree(data);
		return STATE_READ_OK;
	}

	/* version 2: the checksum first, over everything but itself */
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, data, n - sizeof(pg_crc32c));
	FIN_CRC32C(crc);
	memcpy(&stored, data + n - sizeof(pg_crc32c), sizeof(pg_crc32c));
	if (!EQ_CRC32C(crc, stored))
	{
		snprintf(msg, len, "The checksum is %08x, expected %08x.", stored, crc);
		return STATE_READ_CORRUPT;
	}
	{
		StateHeader h;

		if (n < (ssize_t) (sizeof(StateHeader) + sizeof(pg_crc32c)))
		{
			snprintf(msg, len, "The file has %lld bytes, too few for its header.", (long long) n);
			return STATE_READ_CORRUPT;
		}
		memcpy(&h, data, sizeof(h));
		if (h.nslots > SNOWSEQ_STATE_MAX_SLOTS ||
			n != (ssize_t) (sizeof(StateHeader) + h.nslots * sizeof(SavedSlot) + sizeof(pg_crc32c)))
		{
			snprintf(msg, len, "The file has %lld bytes, which does not match its %u reservations.",
					 (long long) n, h.nslots);
			return STATE_READ_CORRUPT;
		}
		s->config = h.config;
		s->nslots = h.nslots;
		s->slots = palloc0(Max(h.nslots, 1) * sizeof(SavedSlot));
		memcpy(s->slots, data + sizeof(StateHeader), h.nslots * sizeof(SavedSlot));
	}
	pfree(data);
	return STATE_READ_OK;
}

/*
 * Write a file of the data directory durably: a temporary file (created
 * with mode), fsync, durable rename.  The state file and its copy, the
 * keyring and the backfill maps are all written this way.
 */
void
StateWriteDurably(const char *buf, size_t len, const char *path, const char *tmp, mode_t mode)
{
	int			fd = OpenTransientFilePerm(tmp, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY, mode);

	if (fd < 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", tmp)));
	errno = 0;
	if (write(fd, buf, len) != (ssize_t) len)
	{
		if (errno == 0)
			errno = ENOSPC;
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", tmp)));
	}
	if (CloseTransientFile(fd) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not close file \"%s\": %m", tmp)));
	/* fsyncs the file, renames, fsyncs the directory */
	durable_rename(tmp, path, ERROR);
}

/* Write the state file, then its copy. */
void
StateWriteFiles(const SavedState *s)
{
	StateHeader h;
	size_t		body = s->nslots * sizeof(SavedSlot);
	size_t		len = sizeof(h) + body + sizeof(pg_crc32c);
	char	   *buf = palloc(len);
	pg_crc32c	crc;

	memset(&h, 0, sizeof(h));
	h.magic = SNOWSEQ_STATE_MAGIC;
	h.version = SNOWSEQ_STATE_VERSION;
	h.config = s->config;
	h.nslots = s->nslots;
	memcpy(buf, &h, sizeof(h));
	memcpy(buf + sizeof(h), s->slots, body);
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, buf, sizeof(h) + body);
	FIN_CRC32C(crc);
	memcpy(buf + sizeof(h) + body, &crc, sizeof(crc));

	StateWriteDurably(buf, len, SNOWSEQ_STATE_FILE, SNOWSEQ_STATE_TMP, pg_file_create_mode);
	StateWriteDurably(buf, len, SNOWSEQ_STATE_COPY, SNOWSEQ_STATE_COPY_TMP, pg_file_create_mode);
	pfree(buf);
}
