%% big, chameneos, fib, fibpool: see bench/savina/*.c for what each does
%% and counts. run(Name, Params) -> {Messages, ResultOk}.
-module(savina_big).
-export([run/2]).

run(big, #{n := N, actors := A}) ->
    Self = self(),
    Actors = list_to_tuple([spawn_link(fun() -> big_wait(Self, N) end) || _ <- lists:seq(1, A)]),
    [element(I, Actors) ! {peers, Actors, I} || I <- lists:seq(1, A)],
    [receive big_done -> ok end || _ <- lists:seq(1, A)],
    [element(I, Actors) ! stop || I <- lists:seq(1, A)],
    Answered = lists:sum([receive {answered, C} -> C end || _ <- lists:seq(1, A)]),
    {2 * A * N, Answered =:= A * N};
run(chameneos, #{n := N, actors := C}) ->
    Mall = self(),
    [spawn_link(fun() -> Mall ! {meet, self(), I rem 3}, chameneos(Mall, I rem 3, 0) end)
     || I <- lists:seq(0, C - 1)],
    Met = mall(N, none, C, 0),
    {4 * N, Met =:= 2 * N};
run(fib, #{n := N}) ->
    Self = self(),
    spawn_link(fun() -> fib_call(Self, N) end),
    receive {fib, V} -> {2 * fib_calls(N), V =:= fib_value(N)} end;
run(fibpool, #{n := N, actors := P}) ->
    Self = self(),
    Pool = list_to_tuple([spawn_link(fun() -> pool_wait(Self) end) || _ <- lists:seq(1, P)]),
    [element(I, Pool) ! {pool, Pool, I} || I <- lists:seq(1, P)],
    element(1, Pool) ! {req, N, Self, root},
    receive {res, root, V} -> ok end,
    [element(I, Pool) ! stop || I <- lists:seq(1, P)],
    {2 * fib_calls(N), V =:= fib_value(N)}.

%% ---- big ----

big_wait(Main, N) ->
    receive {peers, Actors, Me} -> big_ping(Main, N, Actors, Me, 0, 0) end.

big_ping(Main, N, _, _, Sent, Answered) when Sent =:= N ->
    Main ! big_done, big_loop(Main, N, none, none, Sent, Answered);
big_ping(Main, N, Actors, Me, Sent, Answered) ->
    W = tuple_size(Actors),
    Other = (Me + rand:uniform(W - 1) - 1) rem W + 1,
    element(Other, Actors) ! {ping, self()},
    big_loop(Main, N, Actors, Me, Sent + 1, Answered).

big_loop(Main, N, Actors, Me, Sent, Answered) ->
    receive
        {ping, From} -> From ! pong, big_loop(Main, N, Actors, Me, Sent, Answered + 1);
        pong -> big_ping(Main, N, Actors, Me, Sent, Answered);
        stop -> Main ! {answered, Answered}
    end.

%% ---- chameneos: the calling process is the mall ----

mall(_, _, 0, Met) -> Met;
mall(Left, Waiting, Members, Met) ->
    receive
        {faded, Count} -> mall(Left, Waiting, Members - 1, Met + Count);
        {meet, From, _} when Left =:= 0 -> From ! stop, mall(Left, Waiting, Members, Met);
        {meet, From, Colour} when Waiting =:= none -> mall(Left, {From, Colour}, Members, Met);
        {meet, From, Colour} ->
            {First, _} = Waiting,
            First ! {meet, From, Colour},
            mall(Left - 1, none, Members, Met)
    end.

complement(C, C) -> C;
complement(A, B) -> 3 - A - B.

chameneos(Mall, Colour, Meetings) ->
    receive
        {meet, Other, OtherColour} ->
            New = complement(Colour, OtherColour),
            Other ! {change, New},
            Mall ! {meet, self(), New},
            chameneos(Mall, New, Meetings + 1);
        {change, New} ->
            Mall ! {meet, self(), New},
            chameneos(Mall, New, Meetings + 1);
        stop -> Mall ! {faded, Meetings}
    end.

%% ---- fib: a process per call ----

fib_call(Parent, N) when N < 2 -> Parent ! {fib, N};
fib_call(Parent, N) ->
    Self = self(),
    spawn_link(fun() -> fib_call(Self, N - 1) end),
    spawn_link(fun() -> fib_call(Self, N - 2) end),
    receive {fib, A} -> receive {fib, B} -> Parent ! {fib, A + B} end end.

fib_value(N) -> fib_value(N, 0, 1).
fib_value(0, A, _) -> A;
fib_value(N, A, B) -> fib_value(N - 1, B, A + B).

fib_calls(N) -> 2 * fib_value(N + 1) - 1.

%% ---- fibpool: a member keeps a join per request it split ----

pool_wait(Main) ->
    receive {pool, Pool, Me} -> pool_loop(Main, Pool, Me, Me, #{}) end.

pool_loop(Main, Pool, Me, Next, Joins) ->
    receive
        {req, N, From, Tag} when N < 2 ->
            From ! {res, Tag, N},
            pool_loop(Main, Pool, Me, Next, Joins);
        {req, N, From, Tag} ->
            Ref = make_ref(),
            N1 = Next rem tuple_size(Pool) + 1,
            N2 = N1 rem tuple_size(Pool) + 1,
            element(N1, Pool) ! {req, N - 1, self(), Ref},
            element(N2, Pool) ! {req, N - 2, self(), Ref},
            pool_loop(Main, Pool, Me, N2, Joins#{Ref => {From, Tag, none}});
        {res, Ref, V} ->
            case maps:get(Ref, Joins) of
                {From, Tag, none} ->
                    pool_loop(Main, Pool, Me, Next, Joins#{Ref := {From, Tag, V}});
                {From, Tag, W} ->
                    From ! {res, Tag, V + W},
                    pool_loop(Main, Pool, Me, Next, maps:remove(Ref, Joins))
            end;
        stop -> ok
    end.
