%% pingpong, counting, threadring, fjthrput: see bench/savina/*.c for what
%% each does and counts. run(Name, Params) -> {Messages, ResultOk}.
-module(savina_small).
-export([run/2]).

run(pingpong, #{n := N}) ->
    Pong = spawn_link(fun pong/0),
    {2 * N, ping(Pong, 1, N)};
run(counting, #{n := N}) ->
    Counter = spawn_link(fun() -> counter(0) end),
    [Counter ! increment || _ <- lists:seq(1, N)],
    Counter ! {retrieve, self()},
    receive {count, C} -> {N + 2, C =:= N} end;
run(threadring, #{n := N, actors := A}) ->
    Self = self(),
    Ring = [spawn_link(fun() -> member(Self, 0) end) || _ <- lists:seq(1, A)],
    [First | _] = Ring,
    lists:foreach(fun({M, Next}) -> M ! {next, Next} end,
                  lists:zip(Ring, tl(Ring) ++ [First])),
    First ! {token, N},
    receive ring_done -> ok end,
    [M ! stop || M <- Ring],
    Passes = lists:sum([receive {passes, P} -> P end || _ <- Ring]),
    {N, Passes =:= N};
run(fjthrput, #{n := N, actors := A}) ->
    Self = self(),
    Workers = [spawn_link(fun() -> fj_worker(Self, N, 0, true) end) || _ <- lists:seq(1, A)],
    spawn_link(fun() -> fj_drive(N, Workers) end),
    Oks = [receive {fj_done, Ok} -> Ok end || _ <- Workers],
    {A * N, lists:all(fun(Ok) -> Ok end, Oks)}.

ping(_, I, N) when I > N -> true;
ping(Pong, I, N) ->
    Pong ! {ping, self(), I},
    receive
        {pong, I} -> ping(Pong, I + 1, N);
        {pong, _} -> false
    end.

pong() ->
    receive
        {ping, From, I} -> From ! {pong, I}, pong()
    end.

counter(C) ->
    receive
        increment -> counter(C + 1);
        {retrieve, From} -> From ! {count, C}
    end.

member(Main, Passes) ->
    receive {next, Next} -> member(Main, Next, Passes) end.

member(Main, Next, Passes) ->
    receive
        {token, 0} -> Main ! ring_done, member(Main, Next, Passes);
        {token, Left} -> Next ! {token, Left - 1}, member(Main, Next, Passes + 1);
        stop -> Main ! {passes, Passes}
    end.

fj_drive(0, _) -> ok;
fj_drive(N, Workers) ->
    [W ! {work, 37.2} || W <- Workers],
    fj_drive(N - 1, Workers).

fj_worker(Main, N, N, Ok) -> Main ! {fj_done, Ok};
fj_worker(Main, N, Got, Ok) ->
    receive
        {work, Theta} ->
            S = math:sin(Theta),
            fj_worker(Main, N, Got + 1, Ok andalso S * S > 0)
    end.
