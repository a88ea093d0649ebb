// concord: collective communication for distributed deep learning.
#pragma once

#include <concord/allreduce.hpp>
#include <concord/communicator.hpp>
#include <concord/engine.hpp>
#include <concord/error.hpp>
#include <concord/shared_buffer.hpp>
#include <concord/types.hpp>
#include <concord/version.hpp>
