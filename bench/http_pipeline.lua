-- HTTP pipelining for wrk, as TechEmpower's plaintext test drives it: each
-- write carries DEPTH requests for the URL's path (default 16), and the
-- next write goes once all their responses are in.
--
--   wrk -s bench/http_pipeline.lua http://127.0.0.1:P/plaintext -- 16
--
-- wrk counts what it reads back response by response (it parses each), so
-- its Requests/sec is responses per second, 16 per write: no scaling.

init = function(args)
  local depth = tonumber(args[1]) or 16
  local r = {}
  for i = 1, depth do
    r[i] = wrk.format()
  end
  req = table.concat(r)
end

request = function()
  return req
end
