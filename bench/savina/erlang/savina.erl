%% The Savina suite in Erlang, the twin of bench/savina/*.c: processes and
%% messages, run as
%%   erl -noshell +S 2 -pa DIR -run savina main -extra NAME [--n N]
%%       [--actors A] [--workers W] [--reps R] [--warmup K] [--quick]
%% (after -extra, so that erl leaves the options alone).
%% with the options, parameters and output line of
%% bench/savina/common/savina.h and specs.c. --workers sets the schedulers
%% online (at most +S's). Erlang has no malloc count to offer: its
%% mallocs_per_msg is "-". The peak RSS is the kernel's VmHWM, what
%% getrusage's ru_maxrss reports.
-module(savina).
-export([main/0]).

%% {n, n under --quick, actors, actors under --quick, module}
spec("pingpong") -> {40000, 10000, 2, 2, savina_small};
spec("counting") -> {1000000, 100000, 2, 2, savina_small};
spec("threadring") -> {100000, 20000, 500, 500, savina_small};
spec("fjthrput") -> {10000, 2000, 60, 60, savina_small};
spec("big") -> {20000, 2000, 120, 120, savina_big};
spec("chameneos") -> {200000, 20000, 100, 100, savina_big};
spec("fib") -> {22, 18, 1, 1, savina_big};
spec("fibpool") -> {25, 18, 8, 8, savina_big};
spec(_) -> none.

main() ->
    [Name | Args] = init:get_plain_arguments(),
    case spec(Name) of
        none ->
            io:format(standard_error, "savina erlang: no benchmark ~s~n", [Name]),
            halt(2);
        {N, NQ, A, AQ, Mod} ->
            Opts = options(Args, #{}),
            Q = maps:get(quick, Opts, false),
            P = #{n => maps:get(n, Opts, pick(Q, N, NQ)),
                  actors => maps:get(actors, Opts, pick(Q, A, AQ)),
                  reps => maps:get(reps, Opts, pick(Q, 3, 1)),
                  warmup => maps:get(warmup, Opts, pick(Q, 1, 0))},
            erlang:system_flag(schedulers_online, maps:get(workers, Opts, 2)),
            halt(report(Name, Mod, P))
    end.

pick(false, Default, _) -> Default;
pick(true, _, Quick) -> Quick.

options([], Acc) -> Acc;
options(["--quick" | T], Acc) -> options(T, Acc#{quick => true});
options([[$-, $- | Key], V | T], Acc) ->
    options(T, Acc#{list_to_atom(Key) => list_to_integer(V)});
options([Bad | _], _) ->
    io:format(standard_error, "savina erlang: bad option ~s~n", [Bad]),
    halt(2).

%% One run: {microseconds, messages, whether the result checked out}.
measure(Name, Mod, P) ->
    T0 = erlang:monotonic_time(microsecond),
    {Msgs, Ok} = Mod:run(list_to_atom(Name), P),
    {erlang:monotonic_time(microsecond) - T0, Msgs, Ok}.

report(Name, Mod, #{warmup := W, reps := R} = P) ->
    Runs = [measure(Name, Mod, P) || _ <- lists:seq(1, W + R)],
    case lists:all(fun({_, _, Ok}) -> Ok end, Runs) of
        false ->
            io:format(standard_error, "savina ~s: run failed: wrong result~n", [Name]),
            io:format("savina name=~s runtime=erlang check=FAILED~n", [Name]),
            1;
        true ->
            Sorted = lists:sort(lists:nthtail(W, Runs)),
            {Us, Msgs, _} = lists:nth(R div 2 + 1, Sorted),
            S = Us / 1.0e6,
            io:format("savina name=~s runtime=erlang msgs_per_s=~b elapsed_s=~.4f "
                      "rss_mib=~.1f mallocs_per_msg=- msgs=~b n=~b actors=~b reps=~b check=ok~n",
                      [Name, round(Msgs / S), S, peak_rss_kib() / 1024, Msgs,
                       maps:get(n, P), maps:get(actors, P), R]),
            0
    end.

peak_rss_kib() ->
    {ok, Status} = file:read_file("/proc/self/status"),
    [Line] = [L || L <- binary:split(Status, <<"\n">>, [global]),
                   binary:match(L, <<"VmHWM:">>) =/= nomatch],
    [_, Kib | _] = binary:split(Line, [<<" ">>, <<"\t">>], [global, trim_all]),
    binary_to_integer(Kib).
