//! What stands in front of N workers in production (a load balancer): every connection Restate
//! opens goes to the first worker that accepts it.

use tokio::net::{TcpListener, TcpStream};

pub(crate) async fn serve(listener: TcpListener, workers: Vec<u16>) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            return;
        };
        let workers = workers.clone();
        tokio::spawn(async move {
            for port in workers {
                if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", port)).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    return;
                }
            }
        });
    }
}
