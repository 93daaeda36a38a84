package hivejoinopts.skew.runtime

import org.apache.spark.sql.execution.aggregate.BaseAggregateExec
import org.apache.spark.sql.execution.joins.ShuffledJoin

/** What a split copies into each branch: the operators above the join that rely on its partitioning. */
class JoinRegionSuite extends CompletedJoinStages {

  private def regionOf(q: String): (Completed, Either[String, JoinRegion]) = {
    val c = completed(q)
    (c, JoinRegion.of(c.plan, c.join))
  }

  test("a GROUP BY on the key above the join: the aggregates copied, no further join") {
    val (c, region) = regionOf("SELECT big.k, count(*), sum(small.w) FROM big JOIN small " +
      "ON big.k = small.k GROUP BY big.k")
    val r = region.toOption.get
    assert(r.join eq c.join)
    assert(r.path.count(_.isInstanceOf[BaseAggregateExec]) == 2, r.path.map(_.nodeName))
    assert(r.follows.isEmpty && (r.path.last eq c.join))
    // The copy with another join in the join's place keeps the nodes above.
    val copied = r.copyWith(c.join.withNewChildren(c.join.children), (_, child) => child)
    assert(copied.collect { case a: BaseAggregateExec => a }.size == 2)
  }

  test("a further join on the key above it: followed, its other input a completed stage") {
    val (c, region) = regionOf("SELECT big.k, small.w, s2.w FROM big JOIN small ON big.k = small.k " +
      "JOIN small s2 ON big.k = s2.k")
    val r = region.toOption.get
    assert(r.follows.size == 1)
    val f = r.follows.head
    assert(f.join ne c.join)
    assert(f.other.numPartitions == 8)
    assert(f.join.isInstanceOf[ShuffledJoin])
    // small's shuffle is reused for s2: its keys are s2's, the attributes the stage outputs.
    assert(f.other.keys.forall(_.references.subsetOf(f.other.stage.outputSet)), f.other.keys)
    assert(f.other.keys.head.semanticEquals(f.join.rightKeys.head), f.other.keys)
  }

  test("stays away: a window above the join, an expression that is not deterministic") {
    val (_, window) = regionOf("SELECT big.k, rank() OVER (PARTITION BY big.k ORDER BY big.v) " +
      "FROM big JOIN small ON big.k = small.k")
    assert(window.left.exists(_.contains("relies on the join's partitioning")), window)
    // Between the join and the GROUP BY that relies on it: a projection of rand().
    val (_, random) = regionOf("SELECT k, sum(x) FROM (SELECT big.k, big.v + rand(1) AS x " +
      "FROM big JOIN small ON big.k = small.k) GROUP BY k")
    assert(random.left.exists(_.contains("not deterministic")), random)
  }
}
