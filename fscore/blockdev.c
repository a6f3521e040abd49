/* SPDX-License-Identifier: GPL-2.0-or-later */
/* Block devices: the generic checks, and the file and memory implementations. */

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mem.h"
#include "o2fs/blockdev.h"

#define SECTOR 512u

static int check_range(const struct o2_blockdev *dev, size_t len, uint64_t off)
{
	if (off % dev->sector_size || len % dev->sector_size)
		return -EINVAL;
	if (off > dev->size || len > dev->size - off)
		return -ENXIO;
	return 0;
}

int o2_blockdev_read(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off)
{
	int r = check_range(dev, len, off);

	if (r < 0)
		return r;
	if (len == 0)
		return 0;
	return dev->ops->read(dev, buf, len, off);
}

int o2_blockdev_read_data(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off,
			  uint64_t owner)
{
	int r = check_range(dev, len, off);

	if (r < 0)
		return r;
	if (len == 0)
		return 0;
	return dev->ops->read_data ? dev->ops->read_data(dev, buf, len, off, owner)
				   : dev->ops->read(dev, buf, len, off);
}

/* A write: ops->write_data with owner where there is one (data), else ops->write. */
static int write_as(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off,
		    bool data, uint64_t owner)
{
	int r = check_range(dev, len, off);

	if (r < 0)
		return r;
	if (dev->read_only)
		return -EROFS;
	if (len == 0)
		return 0;
	r = data && dev->ops->write_data ? dev->ops->write_data(dev, buf, len, off, owner)
					 : dev->ops->write(dev, buf, len, off);
	if (r == 0)
		dev->writes++;
	return r;
}

int o2_blockdev_write_data(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off,
			   uint64_t owner)
{
	return write_as(dev, buf, len, off, true, owner);
}

int o2_blockdev_write(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off)
{
	return write_as(dev, buf, len, off, false, 0);
}

int o2_blockdev_flush(struct o2_blockdev *dev)
{
	if (dev->read_only || !dev->ops->flush)
		return 0;
	__atomic_fetch_add(&dev->flushes, 1, __ATOMIC_RELAXED);
	return dev->ops->flush(dev);
}

uint64_t o2_blockdev_flushes(const struct o2_blockdev *dev)
{
	return __atomic_load_n(&dev->flushes, __ATOMIC_RELAXED);
}

void o2_blockdev_free(struct o2_blockdev *dev)
{
	if (dev)
		dev->ops->destroy(dev);
}

/* ---- file ---- */

struct file_dev {
	struct o2_blockdev dev;
	int fd;
	int direct;
};

/* O_DIRECT needs aligned buffers; callers' buffers may not be. */
static int bounce_io(struct file_dev *f, void *buf, const void *wbuf, size_t len, uint64_t off)
{
	void *tmp;
	ssize_t n;
	int r = 0;

	if (o2_memalign(&tmp, 4096, len))
		return -ENOMEM;
	if (wbuf)
		memcpy(tmp, wbuf, len);
	for (size_t done = 0; done < len; done += (size_t)n) {
		n = wbuf ? pwrite(f->fd, (char *)tmp + done, len - done, (off_t)(off + done))
			 : pread(f->fd, (char *)tmp + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR) {
			n = 0;
			continue;
		}
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0) {
			r = -EIO;
			break;
		}
	}
	if (!r && buf)
		memcpy(buf, tmp, len);
	free(tmp);
	return r;
}

static int file_read(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off)
{
	struct file_dev *f = (struct file_dev *)dev;

	if (f->direct && ((uintptr_t)buf % 4096 || len % 4096 || off % 4096))
		return bounce_io(f, buf, NULL, len, off);
	for (size_t done = 0; done < len;) {
		ssize_t n = pread(f->fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* the file shrank under us */
		done += (size_t)n;
	}
	return 0;
}

static int file_write(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off)
{
	struct file_dev *f = (struct file_dev *)dev;

	if (f->direct && ((uintptr_t)buf % 4096 || len % 4096 || off % 4096))
		return bounce_io(f, NULL, buf, len, off);
	for (size_t done = 0; done < len;) {
		ssize_t n = pwrite(f->fd, (const char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return 0;
}

static int file_flush(struct o2_blockdev *dev)
{
	struct file_dev *f = (struct file_dev *)dev;

	return fdatasync(f->fd) < 0 ? -errno : 0;
}

static void file_destroy(struct o2_blockdev *dev)
{
	struct file_dev *f = (struct file_dev *)dev;

	close(f->fd);
	free(f);
}

static const struct o2_blockdev_ops file_ops = {
	.read = file_read,
	.write = file_write,
	.flush = file_flush,
	.destroy = file_destroy,
};

int o2_blockdev_file_fd(const struct o2_blockdev *dev, int *direct)
{
	const struct file_dev *f = (const struct file_dev *)dev;

	if (dev->ops != &file_ops)
		return -1;
	*direct = f->direct;
	return f->fd;
}

int o2_blockdev_open_file(const char *path, unsigned flags, struct o2_blockdev **ret_dev)
{
	struct file_dev *f;
	struct stat st;
	uint64_t size;
	int oflags = (flags & O2_DEV_RDONLY) ? O_RDONLY : O_RDWR;
	int fd, r;

	if (flags & O2_DEV_DIRECT)
		oflags |= O_DIRECT;
	fd = open(path, oflags | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out_close;
	}
	if (S_ISBLK(st.st_mode)) {
		int ro = 0;

		if (ioctl(fd, BLKGETSIZE64, &size) < 0) {
			r = -errno;
			goto out_close;
		}
		/* a read-only block device opens O_RDWR and fails each write: say it now */
		if (!(flags & O2_DEV_RDONLY) && ioctl(fd, BLKROGET, &ro) == 0 && ro) {
			r = -EROFS;
			goto out_close;
		}
	} else if (S_ISREG(st.st_mode)) {
		size = (uint64_t)st.st_size;
	} else {
		r = -ENOTBLK;
		goto out_close;
	}
	if ((flags & O2_DEV_EXCLUSIVE) && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		r = errno == EWOULDBLOCK ? -EBUSY : -errno;
		goto out_close;
	}
	f = o2_calloc(1, sizeof(*f));
	if (!f) {
		r = -ENOMEM;
		goto out_close;
	}
	f->dev.ops = &file_ops;
	f->dev.size = size / SECTOR * SECTOR;
	f->dev.sector_size = SECTOR;
	f->dev.read_only = !!(flags & O2_DEV_RDONLY);
	f->fd = fd;
	f->direct = !!(flags & O2_DEV_DIRECT);
	*ret_dev = &f->dev;
	return 0;

out_close:
	close(fd);
	return r;
}

/* ---- memory ---- */

struct mem_dev {
	struct o2_blockdev dev;
	uint8_t *data;
};

static int mem_read(struct o2_blockdev *dev, void *buf, size_t len, uint64_t off)
{
	memcpy(buf, ((struct mem_dev *)dev)->data + off, len);
	return 0;
}

static int mem_write(struct o2_blockdev *dev, const void *buf, size_t len, uint64_t off)
{
	memcpy(((struct mem_dev *)dev)->data + off, buf, len);
	return 0;
}

static void mem_destroy(struct o2_blockdev *dev)
{
	free(((struct mem_dev *)dev)->data);
	free(dev);
}

static const struct o2_blockdev_ops mem_ops = {
	.read = mem_read,
	.write = mem_write,
	.flush = NULL,
	.destroy = mem_destroy,
};

int o2_blockdev_new_memory_from(const void *data, size_t len, uint64_t size,
				struct o2_blockdev **ret_dev)
{
	struct mem_dev *m;

	size = size / SECTOR * SECTOR;
	if (size > SIZE_MAX)
		return -ENOMEM;
	m = o2_calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->data = o2_calloc(1, size ? (size_t)size : 1);
	if (!m->data) {
		free(m);
		return -ENOMEM;
	}
	if (data)
		memcpy(m->data, data, len < size ? len : (size_t)size);
	m->dev.ops = &mem_ops;
	m->dev.size = size;
	m->dev.sector_size = SECTOR;
	*ret_dev = &m->dev;
	return 0;
}

int o2_blockdev_new_memory(uint64_t size, struct o2_blockdev **ret_dev)
{
	return o2_blockdev_new_memory_from(NULL, 0, size, ret_dev);
}

uint8_t *o2_blockdev_memory_data(struct o2_blockdev *dev)
{
	return dev->ops == &mem_ops ? ((struct mem_dev *)dev)->data : NULL;
}
