/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The input format of fuzz_locktab (shared with fuzz_make_seeds): a
 * sequence of operations on a simulated CPG group, each an opcode byte
 * (taken modulo LT_OP_COUNT) and its argument bytes.  Missing bytes read
 * as 0.
 */
#ifndef FUZZ_LOCKTAB_H
#define FUZZ_LOCKTAB_H

enum lt_op {
	LT_JOIN,      /* a: slots to join (a & 7, (a >> 3) & 7, as slot % LT_SLOTS) */
	LT_LEAVE,     /* a: slot, b: reason (% 3: LEAVE, NODEDOWN, PROCDOWN), c: bit 0 deliver its mail first */
	LT_LOCK,      /* a: slot, b: name, c: mode (% 3) | 0x4 NOQUEUE | 0x8 RECOVERY */
	LT_DOWN,      /* a: slot, b: name, c: mode (% 3: NL, PR, UNLOCK) | 0x4 with lvb, d: lvb byte */
	LT_CANCEL,    /* a: slot, b: name */
	LT_FENCED,    /* a: sending slot, b: nodeid (% 6) */
	LT_RECOVERED, /* a: sending slot, b: nodeid (% 6) */
	LT_DELIVER,   /* a: how many queued messages to deliver (% 8 + 1) */
	LT_RAW,	      /* a: sending slot, b: length, then that many bytes: a message as is */
	LT_MUTATE,    /* a, b: offset (u16), c: xor: change the next queued message */
	LT_BADCONF,   /* a: kind: a confchg that contradicts itself, to every table */
	LT_REACT,     /* a: slot: answer the blocking notices it has, as a daemon would */
	LT_SPLIT,     /* a: slots (bit i: slot i) cut off from the others, each side sees the other go down */
	LT_MERGE,     /* the cut-off slots come back: each side sees the other join */
	LT_OP_COUNT
};

#define LT_SLOTS 6
#define LT_NAMES 5

#endif
