// Nexmark Q0-Q14 on Apache Flink's DataStream API, in a local MiniCluster
// (same JVM), next to which `run.sh` runs Tidewater's `nexmark` binary on as many events.
// Compiled by `run.sh` against the jars that `pip install apache-flink` puts in
// pyflink/lib.
//
// The events come from a generator written here after the one Tidewater uses (the
// `nexmark` crate, itself after Beam's): the same proportions (1 person : 3 auctions :
// 46 bids in every 50 events), ids, hot sellers / bidders / auctions / channels, price
// distribution, string lengths and average event sizes, and event times at a fixed rate;
// not the same random values (each event draws from a SplittableRandom seeded with its
// number), so the outputs agree in kind and size, not value by value.
//
// The queries follow Tidewater's (examples/nexmark/src/queries, after Beam's):
//   q0 passthrough; q1 bid prices in euros; q2 bids of auctions divisible by 123;
//   q3 persons of OR/ID/CA joined with their auctions of category 10 (incremental join);
//   q5 per 10 s window sliding every 5 s, the auction(s) with the most bids;
//   q7 per 10 s window, the bid(s) with the highest price;
//   q8 persons joined with the auctions they opened in the same 10 s window;
//   q9 per auction, its highest valid bid (before expiry, at least the reserve), emitted
//      when the auction closes (event time expires - 1), bids that come before their
//      auction held until it does;
//   q4 Q9's winners per category, mean price per 10 s window sliding every 5 s;
//   q6 Q9's winners per seller, the mean price of their last 10 (by bid time, then
//      price), once at the end (the global window's final pane, as Tidewater's);
//   q10 per 10 s window and shard (auction % 4), the window's bid lines sorted into a
//      file of a temporary directory, its name out;
//   q11 bids per bidder session (10 s gap);
//   q12 bids per bidder per pane of 10 s of processing time from the pane's first bid,
//      and a final pane per bidder at the end (Beam's FireAlways, as Tidewater's);
//   q13 every bid with its extra replaced by a bounded side table's row (bidder % 500),
//      the table loaded when the task opens;
//   q14 bids of 0.908 * price in (1M, 50M), with the converted price, the time of day
//      and the number of 'c's in extra.
//
// usage: FlinkNexmark <query> <events> <parallelism> [rate]
// Prints: RESULT peer=flink query=qN events=N parallelism=P outputs=N job_ms=N net_ms=N
//         events_per_s=N   (job_ms: execute() on the wall clock, the local cluster's start
//         included, as Tidewater's figure includes its runner's; net_ms: Flink's own
//         net runtime of the job; events_per_s: over job_ms)
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.JoinFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeHint;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.KeyedCoProcessFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;

public class FlinkNexmark {

    /** A Nexmark event: a person, an auction or a bid (a POJO: Flink serializes it by field). */
    public static class Event {
        public static final int PERSON = 0, AUCTION = 1, BID = 2;
        public int kind;
        public long dateTime;
        // person
        public long id;
        public String name, emailAddress, creditCard, city, state;
        // auction (id above)
        public String itemName, description;
        public long initialBid, reserve, expires, seller, category;
        // bid
        public long auction, bidder, price;
        public String channel, url;
        public String extra;
        public Event() {}
    }

    // ---- the generator -------------------------------------------------------------
    static final int PERSON_PROPORTION = 1, AUCTION_PROPORTION = 3, DENOMINATOR = 50;
    static final long FIRST_PERSON_ID = 1000, FIRST_AUCTION_ID = 1000, FIRST_CATEGORY_ID = 10;
    static final int ACTIVE_PEOPLE = 1000, IN_FLIGHT_AUCTIONS = 100, PERSON_ID_LEAD = 10,
            AUCTION_ID_LEAD = 10, NUM_CATEGORIES = 5;
    static final int HOT_SELLER_RATIO = 4, HOT_AUCTION_RATIO = 2, HOT_BIDDER_RATIO = 4,
            HOT_CHANNEL_RATIO = 2, HOT_RATIO = 100;
    static final String[] FIRST_NAMES = "peter,paul,luke,john,saul,vicky,kate,julie,sarah,deiter,walter".split(",");
    static final String[] LAST_NAMES = "shultz,abrams,spencer,white,bartels,walton,smith,jones,noris".split(",");
    static final String[] CITIES = "phoenix,los angeles,san francisco,boise,portland,bend,redmond,seattle,kent,cheyenne".split(",");
    static final String[] STATES = "az,ca,id,or,wa,wy".split(",");
    static final String[] HOT_CHANNELS = "Google,Facebook,Baidu,Apple".split(",");

    static long timestamp(long n, long rate) { return n * 1000L / rate; }

    static long lastPersonId(long n) {
        long epoch = n / DENOMINATOR, offset = Math.min(n % DENOMINATOR, PERSON_PROPORTION - 1);
        return epoch * PERSON_PROPORTION + offset;
    }

    static long lastAuctionId(long n) {
        long epoch = n / DENOMINATOR, offset = n % DENOMINATOR;
        if (offset < PERSON_PROPORTION) { epoch -= 1; offset = AUCTION_PROPORTION - 1; }
        else if (PERSON_PROPORTION + AUCTION_PROPORTION <= offset) { offset = AUCTION_PROPORTION - 1; }
        else { offset -= PERSON_PROPORTION; }
        return epoch * AUCTION_PROPORTION + offset;
    }

    static long nextPersonId(long n, SplittableRandom r) {
        long people = lastPersonId(n) + 1, active = Math.min(people, ACTIVE_PEOPLE);
        return people - active + r.nextLong(active + PERSON_ID_LEAD);
    }

    static long nextAuctionId(long n, SplittableRandom r) {
        long max = lastAuctionId(n), min = max < IN_FLIGHT_AUCTIONS ? 0 : max - IN_FLIGHT_AUCTIONS;
        return min + r.nextLong(max - min + 1 + AUCTION_ID_LEAD);
    }

    static String letters(SplittableRandom r, int n) {
        char[] c = new char[n];
        for (int i = 0; i < n; i++) c[i] = (char) ('a' + r.nextInt(26));
        return new String(c);
    }

    static String extra(SplittableRandom r, int current, int average) {
        if (current > average) return "";
        int want = average - current, delta = (want + 2) / 5, min = want - delta;
        return letters(r, min + (delta == 0 ? 0 : r.nextInt(2 * delta)));
    }

    static long price(SplittableRandom r) { return Math.round(Math.pow(10.0, r.nextDouble() * 6.0) * 100.0); }

    static Event event(long n, long rate) {
        SplittableRandom r = new SplittableRandom(n);
        Event e = new Event();
        e.dateTime = timestamp(n, rate);
        long offset = n % DENOMINATOR;
        if (offset < PERSON_PROPORTION) {
            e.kind = Event.PERSON;
            e.id = lastPersonId(n) + FIRST_PERSON_ID;
            e.name = FIRST_NAMES[r.nextInt(FIRST_NAMES.length)] + " " + LAST_NAMES[r.nextInt(LAST_NAMES.length)];
            e.emailAddress = letters(r, 7) + "@" + letters(r, 5) + ".com";
            e.creditCard = String.format("%04d %04d %04d %04d", r.nextInt(10000), r.nextInt(10000), r.nextInt(10000), r.nextInt(10000));
            e.city = CITIES[r.nextInt(CITIES.length)];
            e.state = STATES[r.nextInt(STATES.length)];
            int size = 8 + e.name.length() + e.emailAddress.length() + e.creditCard.length() + e.city.length() + e.state.length();
            e.extra = extra(r, size, 200);
        } else if (offset < PERSON_PROPORTION + AUCTION_PROPORTION) {
            e.kind = Event.AUCTION;
            e.id = lastAuctionId(n) + FIRST_AUCTION_ID;
            e.itemName = letters(r, 20);
            e.description = letters(r, 100);
            e.initialBid = price(r);
            e.reserve = e.initialBid + price(r);
            long future = timestamp(n + (long) IN_FLIGHT_AUCTIONS * DENOMINATOR / AUCTION_PROPORTION, rate);
            e.expires = e.dateTime + 1 + r.nextLong(Math.max((future - e.dateTime) * 2, 1));
            long seller = r.nextInt(HOT_SELLER_RATIO) > 0
                    ? (lastPersonId(n) / HOT_RATIO) * HOT_RATIO : nextPersonId(n, r);
            e.seller = seller + FIRST_PERSON_ID;
            e.category = FIRST_CATEGORY_ID + r.nextInt(NUM_CATEGORIES);
            e.extra = extra(r, 8 + 20 + 100 + 40, 500);
        } else {
            e.kind = Event.BID;
            long auction = r.nextInt(HOT_AUCTION_RATIO) > 0
                    ? (lastAuctionId(n) / HOT_RATIO) * HOT_RATIO : nextAuctionId(n, r);
            long bidder = r.nextInt(HOT_BIDDER_RATIO) > 0
                    ? (lastPersonId(n) / HOT_RATIO) * HOT_RATIO + 1 : nextPersonId(n, r);
            e.auction = auction + FIRST_AUCTION_ID;
            e.bidder = bidder + FIRST_PERSON_ID;
            e.price = price(r);
            if (r.nextInt(HOT_CHANNEL_RATIO) > 0) {
                int i = r.nextInt(HOT_CHANNELS.length);
                e.channel = HOT_CHANNELS[i];
                e.url = "https://www.nexmark.com/hot/" + i + "/item.htm?query=1";
            } else {
                int c = r.nextInt(10_000);
                e.channel = "channel-" + c;
                e.url = "https://www.nexmark.com/" + letters(r, 4) + "/" + letters(r, 4) + "/item.htm?query=1&channel_id=" + c;
            }
            e.extra = extra(r, 32, 100);
        }
        return e;
    }

    // ---- the queries -----------------------------------------------------------------

    static final AtomicLong OUTPUTS = new AtomicLong();

    /** Counts what reaches it (MiniCluster: same JVM). */
    public static final class CountingSink<T> implements Sink<T> {
        @Override
        public SinkWriter<T> createWriter(WriterInitContext ctx) {
            return new SinkWriter<T>() {
                long n;
                @Override public void write(T t, Context c) { n++; }
                @Override public void flush(boolean endOfInput) { }
                @Override public void close() { OUTPUTS.addAndGet(n); }
            };
        }
    }

    /** Q3: persons of OR, ID or CA joined with their auctions of category 10, as they come. */
    public static final class IncrementalJoin extends KeyedCoProcessFunction<Long, Event, Event, String> {
        private transient ValueState<Event> person;
        private transient ListState<Event> waiting;
        @Override public void open(OpenContext ctx) {
            person = getRuntimeContext().getState(new ValueStateDescriptor<>("person", Event.class));
            waiting = getRuntimeContext().getListState(new ListStateDescriptor<>("auctions", Event.class));
        }
        @Override public void processElement1(Event p, Context ctx, Collector<String> out) throws Exception {
            person.update(p);
            for (Event a : waiting.get()) out.collect(p.name + "," + p.city + "," + p.state + "," + a.id);
            waiting.clear();
        }
        @Override public void processElement2(Event a, Context ctx, Collector<String> out) throws Exception {
            Event p = person.value();
            if (p != null) out.collect(p.name + "," + p.city + "," + p.state + "," + a.id);
            else waiting.add(a);
        }
    }

    /** Q5: bids per auction in a window. */
    public static final class CountBids implements AggregateFunction<Event, Long, Long> {
        @Override public Long createAccumulator() { return 0L; }
        @Override public Long add(Event e, Long acc) { return acc + 1; }
        @Override public Long getResult(Long acc) { return acc; }
        @Override public Long merge(Long a, Long b) { return a + b; }
    }

    /** Q5: (window end, auction, count) of a window's count. */
    public static final class WithWindow extends ProcessWindowFunction<Long, long[], Long, TimeWindow> {
        @Override public void process(Long auction, Context ctx, Iterable<Long> counts, Collector<long[]> out) {
            for (Long c : counts) out.collect(new long[] {ctx.window().getEnd(), auction, c});
        }
    }

    /** Q5: per window, the auctions with the most bids, once the window's counts are all in. */
    public static final class MaxPerWindow extends KeyedProcessFunction<Long, long[], long[]> {
        private transient ValueState<long[]> best;
        private transient ListState<Long> auctions;
        @Override public void open(OpenContext ctx) {
            best = getRuntimeContext().getState(new ValueStateDescriptor<>("best", long[].class));
            auctions = getRuntimeContext().getListState(new ListStateDescriptor<>("auctions", Types.LONG));
        }
        @Override public void processElement(long[] v, Context ctx, Collector<long[]> out) throws Exception {
            long[] b = best.value();
            if (b == null) { ctx.timerService().registerEventTimeTimer(v[0] - 1); }
            if (b == null || v[2] > b[2]) { best.update(v); auctions.clear(); auctions.add(v[1]); }
            else if (v[2] == b[2]) { auctions.add(v[1]); }
        }
        @Override public void onTimer(long ts, OnTimerContext ctx, Collector<long[]> out) throws Exception {
            long[] b = best.value();
            for (Long a : auctions.get()) out.collect(new long[] {b[0], a, b[2]});
            best.clear();
            auctions.clear();
        }
    }

    /** Q7: the bids with the highest price in a window. */
    public static final class MaxBids implements AggregateFunction<Event, List<Event>, List<Event>> {
        @Override public List<Event> createAccumulator() { return new ArrayList<>(); }
        @Override public List<Event> add(Event e, List<Event> acc) {
            if (acc.isEmpty() || e.price > acc.get(0).price) { acc.clear(); acc.add(e); }
            else if (e.price == acc.get(0).price) { acc.add(e); }
            return acc;
        }
        @Override public List<Event> getResult(List<Event> acc) { return acc; }
        @Override public List<Event> merge(List<Event> a, List<Event> b) {
            for (Event e : b) add(e, a);
            return a;
        }
    }

    /** Q9: whether a bid ranks above another (price, then earlier, smaller bidder, extra). */
    static boolean ranksAbove(Event b, Event o) {
        if (b.price != o.price) return b.price > o.price;
        if (b.dateTime != o.dateTime) return b.dateTime < o.dateTime;
        if (b.bidder != o.bidder) return b.bidder < o.bidder;
        return b.extra.compareTo(o.extra) < 0;
    }

    /** Q9: per auction (the key), the highest valid bid, out when the auction closes. */
    public static final class WinningBids extends KeyedCoProcessFunction<Long, Event, Event, Event[]> {
        private transient ValueState<Event> auction, best;
        private transient ListState<Event> early;
        @Override public void open(OpenContext ctx) {
            auction = getRuntimeContext().getState(new ValueStateDescriptor<>("auction", Event.class));
            best = getRuntimeContext().getState(new ValueStateDescriptor<>("best", Event.class));
            early = getRuntimeContext().getListState(new ListStateDescriptor<>("early", Event.class));
        }
        private void consider(Event a, Event b) throws Exception {
            if (b.dateTime >= a.expires || b.price < a.reserve) return;
            Event o = best.value();
            if (o == null || ranksAbove(b, o)) best.update(b);
        }
        @Override public void processElement1(Event a, Context ctx, Collector<Event[]> out) throws Exception {
            auction.update(a);
            for (Event b : early.get()) consider(a, b);
            early.clear();
            // Every bid before expires has come once the watermark passes expires - 1.
            ctx.timerService().registerEventTimeTimer(a.expires - 1);
        }
        @Override public void processElement2(Event b, Context ctx, Collector<Event[]> out) throws Exception {
            Event a = auction.value();
            if (a == null) early.add(b); else consider(a, b);
        }
        @Override public void onTimer(long ts, OnTimerContext ctx, Collector<Event[]> out) throws Exception {
            Event b = best.value();
            // The auction stays (closed): later bids for it are past its expiry.
            if (b != null) out.collect(new Event[] {auction.value(), b});
            best.clear();
        }
    }

    static DataStream<Event[]> winningBids(DataStream<Event> all) {
        DataStream<Event> auctions = all.filter(e -> e.kind == Event.AUCTION);
        DataStream<Event> bids = all.filter(e -> e.kind == Event.BID);
        return auctions.keyBy(e -> e.id).connect(bids.keyBy(e -> e.auction)).process(new WinningBids())
                .returns(Event[].class);
    }

    /** Q4: the mean of prices. */
    public static final class MeanPrice implements AggregateFunction<Event[], long[], Long> {
        @Override public long[] createAccumulator() { return new long[2]; }
        @Override public long[] add(Event[] w, long[] acc) { acc[0] += w[1].price; acc[1]++; return acc; }
        @Override public Long getResult(long[] acc) { return Math.round((double) acc[0] / acc[1]); }
        @Override public long[] merge(long[] a, long[] b) { a[0] += b[0]; a[1] += b[1]; return a; }
    }

    /** Q6: per seller (the key), the mean of the last 10 winning prices, at the end. */
    public static final class LastTenMean extends KeyedProcessFunction<Long, Event[], long[]> {
        private transient ValueState<ArrayList<long[]>> sales;
        @Override public void open(OpenContext ctx) {
            sales = getRuntimeContext().getState(new ValueStateDescriptor<>("sales",
                    TypeInformation.of(new TypeHint<ArrayList<long[]>>() {})));
        }
        @Override public void processElement(Event[] w, Context ctx, Collector<long[]> out) throws Exception {
            ArrayList<long[]> s = sales.value();
            if (s == null) {
                s = new ArrayList<>();
                ctx.timerService().registerEventTimeTimer(Long.MAX_VALUE);
            }
            s.add(new long[] {w[1].dateTime, w[1].price});
            s.sort((x, y) -> x[0] != y[0] ? Long.compare(x[0], y[0]) : Long.compare(x[1], y[1]));
            while (s.size() > 10) s.remove(0);
            sales.update(s);
        }
        @Override public void onTimer(long ts, OnTimerContext ctx, Collector<long[]> out) throws Exception {
            ArrayList<long[]> s = sales.value();
            long sum = 0;
            for (long[] x : s) sum += x[1];
            out.collect(new long[] {ctx.getCurrentKey(), (2 * sum + s.size()) / (2L * s.size())});
            sales.clear();
        }
    }

    /** Q10: a window's bid lines of one shard, sorted into a file of `dir`; its name out. */
    public static final class WriteShard extends ProcessWindowFunction<Event, String, Long, TimeWindow> {
        private final String dir;
        WriteShard(String dir) { this.dir = dir; }
        @Override public void process(Long shard, Context ctx, Iterable<Event> bids, Collector<String> out) throws IOException {
            List<String> sorted = new ArrayList<>();
            for (Event e : bids) sorted.add(e.auction + "," + e.bidder + "," + e.price + "," + e.dateTime);
            Collections.sort(sorted);
            String name = String.format("bids-%013d-%05d-of-%05d.csv", ctx.window().getStart(), shard, 4);
            Path tmp = Paths.get(dir, name + ".tmp");
            Files.write(tmp, sorted);
            Files.move(tmp, Paths.get(dir, name));
            out.collect(name);
        }
    }

    /** Q12: bids per bidder (the key) per pane of 10 s of processing time from its first
     *  bid; at the end of input, a last pane per bidder (possibly empty). */
    public static final class ProcessingTimePanes extends KeyedProcessFunction<Long, Event, long[]> {
        private transient ValueState<Long> pane;
        private transient ValueState<Boolean> seen;
        @Override public void open(OpenContext ctx) {
            pane = getRuntimeContext().getState(new ValueStateDescriptor<>("pane", Types.LONG));
            seen = getRuntimeContext().getState(new ValueStateDescriptor<>("seen", Types.BOOLEAN));
        }
        @Override public void processElement(Event b, Context ctx, Collector<long[]> out) throws Exception {
            Long n = pane.value();
            if (n == null) {
                ctx.timerService().registerProcessingTimeTimer(ctx.timerService().currentProcessingTime() + 10_000);
                n = 0L;
            }
            if (seen.value() == null) {
                seen.update(true);
                ctx.timerService().registerEventTimeTimer(Long.MAX_VALUE);
            }
            pane.update(n + 1);
        }
        @Override public void onTimer(long ts, OnTimerContext ctx, Collector<long[]> out) throws Exception {
            Long n = pane.value();
            if (n != null || ts == Long.MAX_VALUE) out.collect(new long[] {ctx.getCurrentKey(), n == null ? 0 : n});
            pane.clear();
        }
    }

    /** Q13: the side table (bidder % 500 -> its row), loaded when the task opens. */
    public static final class SideJoin extends RichMapFunction<Event, Event> {
        private transient Map<Long, String> side;
        @Override public void open(OpenContext ctx) {
            side = new HashMap<>();
            for (long i = 0; i < 500; i++) side.put(i, Long.toString(i));
        }
        @Override public Event map(Event b) {
            b.extra = side.get(b.bidder % 500);
            return b;
        }
    }

    /** Q14's output (a POJO: Flink copies it by field between chained operators). */
    public static class Q14Bid {
        public long auction, bidder, dateTime, cCounts;
        public double price;
        public String bidTimeType, extra;
        public Q14Bid() {}
    }

    /** Q14: the converted price, the time of day and the 'c's of extra, of bids in range. */
    static void q14(Event b, Collector<Q14Bid> out) {
        double price = 0.908 * b.price;
        if (price <= 1_000_000.0 || price >= 50_000_000.0) return;
        long hour = b.dateTime / 3_600_000 % 24;
        String type = hour >= 8 && hour <= 18 ? "dayTime" : (hour <= 6 || hour >= 20) ? "nightTime" : "otherTime";
        long c = b.extra.chars().filter(ch -> ch == 'c').count();
        Q14Bid q = new Q14Bid();
        q.auction = b.auction;
        q.bidder = b.bidder;
        q.price = price;
        q.bidTimeType = type;
        q.dateTime = b.dateTime;
        q.extra = b.extra;
        q.cCounts = c;
        out.collect(q);
    }

    public static void main(String[] args) throws Exception {
        String query = args[0];
        long events = Long.parseLong(args[1]);
        int p = Integer.parseInt(args[2]);
        long rate = args.length > 3 ? Long.parseLong(args[3]) : 10_000L;

        Configuration conf = new Configuration();
        conf.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, MemorySize.parse("1g"));
        conf.set(StateBackendOptions.STATE_BACKEND, "hashmap");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(p, conf);
        env.setRuntimeMode(RuntimeExecutionMode.STREAMING);

        // Each parallel instance generates a contiguous range of event numbers, in order:
        // event times rise within an instance, as the watermark assumes.
        DataStream<Event> all = env.fromSequence(0, events - 1)
                .map(n -> event(n, rate)).returns(Event.class).name("generate")
                .assignTimestampsAndWatermarks(WatermarkStrategy.<Event>forMonotonousTimestamps()
                        .withTimestampAssigner((e, prev) -> e.dateTime));
        DataStream<Event> bids = all.filter(e -> e.kind == Event.BID).name("bids");

        DataStream<?> out;
        switch (query) {
            case "q0": out = all.map(e -> e).returns(Event.class); break;
            case "q1": out = bids.map(e -> { e.price = e.price * 89 / 100; return e; }).returns(Event.class); break;
            case "q2": out = bids.filter(e -> e.auction % 123 == 0).map(e -> new long[] {e.auction, e.price}).returns(long[].class); break;
            case "q3": {
                DataStream<Event> persons = all.filter(e -> e.kind == Event.PERSON
                        && (e.state.equals("or") || e.state.equals("id") || e.state.equals("ca")));
                DataStream<Event> auctions = all.filter(e -> e.kind == Event.AUCTION && e.category == 10);
                out = persons.keyBy(e -> e.id).connect(auctions.keyBy(e -> e.seller)).process(new IncrementalJoin());
                break;
            }
            case "q5":
                out = bids.keyBy(e -> e.auction)
                        .window(SlidingEventTimeWindows.of(Duration.ofSeconds(10), Duration.ofSeconds(5)))
                        .aggregate(new CountBids(), new WithWindow())
                        .keyBy(v -> v[0])
                        .process(new MaxPerWindow());
                break;
            case "q7":
                out = bids.windowAll(TumblingEventTimeWindows.of(Duration.ofSeconds(10)))
                        .aggregate(new MaxBids())
                        .flatMap((List<Event> l, Collector<Event> c) -> l.forEach(c::collect)).returns(Event.class);
                break;
            case "q8": {
                DataStream<Event> persons = all.filter(e -> e.kind == Event.PERSON);
                DataStream<Event> auctions = all.filter(e -> e.kind == Event.AUCTION);
                out = persons.join(auctions).where(e -> e.id).equalTo(e -> e.seller)
                        .window(TumblingEventTimeWindows.of(Duration.ofSeconds(10)))
                        .apply((JoinFunction<Event, Event, String>) (pe, a) -> pe.id + "," + pe.name + "," + a.reserve)
                        .returns(String.class);
                break;
            }
            case "q9": out = winningBids(all); break;
            case "q4":
                out = winningBids(all).keyBy(w -> w[0].category)
                        .window(SlidingEventTimeWindows.of(Duration.ofSeconds(10), Duration.ofSeconds(5)))
                        .aggregate(new MeanPrice());
                break;
            case "q6": out = winningBids(all).keyBy(w -> w[0].seller).process(new LastTenMean()); break;
            case "q10": {
                String dir = Files.createTempDirectory("flink-nexmark-q10-").toString();
                out = bids.keyBy(e -> e.auction % 4)
                        .window(TumblingEventTimeWindows.of(Duration.ofSeconds(10)))
                        .process(new WriteShard(dir));
                break;
            }
            case "q11":
                out = bids.keyBy(e -> e.bidder)
                        .window(EventTimeSessionWindows.withGap(Duration.ofSeconds(10)))
                        .aggregate(new CountBids());
                break;
            case "q12": out = bids.keyBy(e -> e.bidder).process(new ProcessingTimePanes()); break;
            case "q13": out = bids.map(new SideJoin()); break;
            case "q14": out = bids.flatMap(FlinkNexmark::q14).returns(Q14Bid.class); break;
            default: throw new IllegalArgumentException("query " + query + " (q0-q14)");
        }
        @SuppressWarnings("unchecked")
        DataStream<Object> sink = (DataStream<Object>) out;
        sink.sinkTo(new CountingSink<>()).name("count");

        long t0 = System.nanoTime();
        long netMs = env.execute("nexmark-" + query).getNetRuntime();
        long jobMs = (System.nanoTime() - t0) / 1_000_000;
        System.out.printf("RESULT peer=flink query=%s events=%d parallelism=%d outputs=%d job_ms=%d net_ms=%d events_per_s=%d%n",
                query, events, p, OUTPUTS.get(), jobMs, netMs, jobMs == 0 ? 0 : events * 1000 / jobMs);
        System.exit(0);
    }
}
