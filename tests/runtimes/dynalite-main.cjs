// dynalite's server as its cli.js starts it, with one change: Node's keep-alive window is wide.
// Node closes an idle kept-alive connection after 5 s; on a machine so busy that the server's
// event loop stalls that long, a request already sent down such a connection finds it closed
// ("socket hang up"), which DynamoDB's own endpoints do not do to a connection in use.
//
//   node tests/runtimes/dynalite-main.cjs <port> <createTableMs>
const [port, createTableMs] = process.argv.slice(2).map(Number);
const server = require('dynalite')({ createTableMs });
server.keepAliveTimeout = 120_000;
server.headersTimeout = 121_000;
server.listen(port, '127.0.0.1', () => console.log(`Dynalite listening at: http://127.0.0.1:${port}`));
