/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The fault-injection test device: passes everything to the inner device
 * and fails the planned read, write or flush with -EIO.
 *
 * Counting: every read, write and flush that reaches the device (after the
 * generic range checks) is numbered from 1 in its own sequence, failed or
 * not.  o2_faultdev_set_plan() installs a plan and restarts the counts, so
 * a plan's numbers are relative to the moment it was set.  A sticky
 * failure makes every later write and flush fail as well; reads keep
 * working (what was written stays readable, as on a device that stopped
 * taking writes).  A short write passes the first half of the failing
 * write, rounded down to whole sectors, to the inner device, then fails.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "o2fs/blockdev.h"

struct fault_dev {
	struct o2_blockdev dev;
	struct o2_blockdev *inner;
	struct o2_fault_plan plan;
	struct o2_fault_counts counts;
	bool dead; /* a sticky failure happened */
};

static const struct o2_blockdev_ops fault_ops;

static struct fault_dev *to_fault(struct o2_blockdev *dev)
{
	return dev && dev->ops == &fault_ops ? (struct fault_dev *)dev : NULL;
}

static int fail(struct fault_dev *f)
{
	f->counts.failed++;
	if (f->plan.sticky)
		f->dead = true;
	return -EIO;
}

static int fault_read(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off)
{
	struct fault_dev *f = (struct fault_dev *)dev;

	if (++f->counts.reads == f->plan.fail_read)
		return fail(f);
	return o2_blockdev_read(f->inner, buf, len, off);
}

static int fault_write(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off)
{
	struct fault_dev *f = (struct fault_dev *)dev;

	if (++f->counts.writes == f->plan.fail_write) {
		size_t part = len / 2 / dev->sector_size * dev->sector_size;

		/* the failure is what the caller must see, whatever the partial write did */
		if (f->plan.short_write && part)
			(void)o2_blockdev_write(f->inner, buf, part, off);
		return fail(f);
	}
	if (f->dead) {
		f->counts.failed++;
		return -EIO;
	}
	return o2_blockdev_write(f->inner, buf, len, off);
}

static int fault_flush(struct o2_blockdev *dev)
{
	struct fault_dev *f = (struct fault_dev *)dev;

	if (++f->counts.flushes == f->plan.fail_flush)
		return fail(f);
	if (f->dead) {
		f->counts.failed++;
		return -EIO;
	}
	return o2_blockdev_flush(f->inner);
}

static void fault_destroy(struct o2_blockdev *dev)
{
	free(dev);
}

static const struct o2_blockdev_ops fault_ops = {
	.read = fault_read,
	.write = fault_write,
	.flush = fault_flush,
	.destroy = fault_destroy,
};

int o2_faultdev_new(struct o2_blockdev *inner, struct o2_blockdev **ret_dev)
{
	struct fault_dev *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->dev.ops = &fault_ops;
	f->dev.size = inner->size;
	f->dev.sector_size = inner->sector_size;
	f->dev.read_only = inner->read_only;
	f->inner = inner;
	*ret_dev = &f->dev;
	return 0;
}

void o2_faultdev_set_plan(struct o2_blockdev *dev, const struct o2_fault_plan *plan)
{
	struct fault_dev *f = to_fault(dev);

	if (!f)
		return;
	f->plan = *plan;
	f->counts = (struct o2_fault_counts){ 0 };
	f->dead = false;
}

void o2_faultdev_counts(struct o2_blockdev *dev, struct o2_fault_counts *ret)
{
	struct fault_dev *f = to_fault(dev);

	*ret = f ? f->counts : (struct o2_fault_counts){ 0 };
}
