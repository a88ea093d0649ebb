// The meeting of a subgroup's members before MPI_Comm_create_group. That call
// waits for every member with no deadline, so a rank that never makes the group
// (a script that calls new_group on some ranks only) would hold the others in it
// for ever. The members first meet with the group's timeout: point to point, on
// the world communicator, each with the group's first member.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace concord_torch {

// Returns once every one of `members` (world ranks, in group order; this
// process, `world_rank`, among them) has come to the meeting. Called on every
// member, over `world` (concord's duplicate of MPI_COMM_WORLD); `group_name`
// labels errors. `timeout_s` bounds the wait (0: none). Throws
// concord::Error(Timeout) naming the members that did not come in time: on the
// first member after timeout_s, which also tells the members that came; on the
// others once told, or after timeout_s and a grace with no word from the first.
// Throws concord::Error(Mismatch) where the first member, or another member
// that this one's arrival reached, is making another group (of other members)
// at the time: ranks that two groups share must make them in the same order,
// or MPI_Comm_create_group would wait for ever.
//
// A member that gives up says so, and every answer names the arrival it
// answers, so a meeting is not misled by what an earlier, failed one left
// behind. What cannot be ruled out: a member giving up in the very moment that
// the first member finds every member there; the others then wait for it in
// MPI_Comm_create_group.
//
// One meeting at a time in a process: torch makes its groups one after
// another. Two made at once from two threads (this call holds no GIL) could
// read each other's words, and are not supported.
void meet_group_members(MPI_Comm world, const std::vector<int>& members, int world_rank,
                        const std::string& group_name, double timeout_s);

}  // namespace concord_torch
