#include <catch2/catch.hpp>

#include <concord/error.hpp>
#include <concord/types.hpp>

using namespace concord;

TEST_CASE("dtype, op and algorithm names round-trip", "[types]") {
  for (DataType d : {DataType::Int8, DataType::UInt8, DataType::Int32, DataType::Int64,
                     DataType::Float16, DataType::BFloat16, DataType::Float32, DataType::Float64}) {
    CHECK(parse_data_type(to_string(d)) == d);
  }
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min, ReduceOp::Max, ReduceOp::Avg}) {
    CHECK(parse_reduce_op(to_string(op)) == op);
  }
  for (Algorithm a : {Algorithm::Auto, Algorithm::Ring, Algorithm::RecursiveDoubling,
                      Algorithm::ReduceScatterAllgather, Algorithm::Hierarchical}) {
    CHECK(parse_algorithm(to_string(a)) == a);
  }
  CHECK(to_string(Algorithm::ReduceScatterAllgather) == "reduce_scatter_allgather");
}

TEST_CASE("unknown names give an error listing the accepted ones", "[types]") {
  try {
    parse_data_type("float128");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::InvalidArgument);
    CHECK_THAT(e.what(),
               Catch::Matchers::Contains("float128") && Catch::Matchers::Contains("bfloat16"));
  }
  CHECK_THROWS_AS(parse_reduce_op("mean"), Error);
  CHECK_THROWS_AS(parse_algorithm("tree"), Error);
}

TEST_CASE("sizes and supported pairs", "[types]") {
  CHECK(size_of(DataType::Int8) == 1);
  CHECK(size_of(DataType::BFloat16) == 2);
  CHECK(size_of(DataType::Float16) == 2);
  CHECK(size_of(DataType::Int32) == 4);
  CHECK(size_of(DataType::Float64) == 8);
  CHECK_FALSE(is_supported(DataType::Int32, ReduceOp::Avg));
  CHECK(is_supported(DataType::BFloat16, ReduceOp::Avg));
  CHECK(is_supported(DataType::UInt8, ReduceOp::Prod));
}
