! Every call that TEMPI wraps, once from Fortran, 2 ranks, on the emulated GPU: built with
! `use mpi` and, with -DTEMPI_TEST_F08, with `use mpi_f08` (on Open MPI the two reach
! different entry points of wrap_fortran_ompi.cpp). The calls with buffers run twice, on
! host arrays (the library alone) and on device arrays (TEMPI), and must agree; a device
! array that reached the library would fault. Before each call that may wait for the
! other rank, rank 0 starts a send from the GPU that rank 1 receives first: a call that
! does not post TEMPI's deferred sends deadlocks (the test's timeout).
program every_call
#ifdef TEMPI_TEST_F08
  use mpi_f08
#else
  use mpi
#endif
  use gpu_buffers
  implicit none
#ifdef TEMPI_TEST_F08
#define HANDLE(kind) type(kind)
#define STATUS_DECL type(MPI_Status) :: st
#else
#define HANDLE(kind) integer
#define STATUS_DECL integer :: st(MPI_STATUS_SIZE)
#endif
  integer, parameter :: m = 8  ! integers a rank sends to each peer
  integer :: rank, peer, ierr, k, pos, detached_size, packed_size, counts(2), displs(2)
  integer :: hs(n), hr(n), packed(n), bsend_buffer(4096)
  integer(MPI_ADDRESS_KIND) :: adispls(2), win_size
  integer, pointer :: ds(:), dr(:)
  logical :: flag
  STATUS_DECL
  HANDLE(MPI_Request) :: req, reqs(2)
  HANDLE(MPI_Message) :: msg
  HANDLE(MPI_Datatype) :: types(2)
  HANDLE(MPI_Comm) :: world, c1, c2, ring
  HANDLE(MPI_Group) :: group
  HANDLE(MPI_Win) :: win
  HANDLE(MPI_File) :: fh
#ifdef TEMPI_TEST_F08
  type(c_ptr) :: baseptr, detached
#else
  integer(MPI_ADDRESS_KIND) :: baseptr
#endif

  call MPI_Init(ierr)
  world = MPI_COMM_WORLD
  call MPI_Comm_rank(world, rank, ierr)
  peer = 1 - rank
  hs = [(1000 * rank + k, k = 1, n)]
  ds => device_array(sentinel)
  call upload(ds, hs)
  hr = sentinel
  dr => device_array(sentinel)
  call MPI_Buffer_attach(bsend_buffer, 4 * size_of_bsend(), ierr)

  ! ---- point to point: each send from the GPU into the peer's GPU ----
  do k = 1, 12
    call MPI_Irecv(dr, m, MPI_INTEGER, peer, k, world, reqs(2), ierr)
    call MPI_Barrier(world, ierr)  ! the receive is posted: MPI_Rsend may go
    select case (k)
    case (1)
      call MPI_Send(ds, m, MPI_INTEGER, peer, k, world, ierr)
    case (2)
      call MPI_Ssend(ds, m, MPI_INTEGER, peer, k, world, ierr)
    case (3)
      call MPI_Bsend(ds, m, MPI_INTEGER, peer, k, world, ierr)
    case (4)
      call MPI_Rsend(ds, m, MPI_INTEGER, peer, k, world, ierr)
    case (5)
      call MPI_Isend(ds, m, MPI_INTEGER, peer, k, world, reqs(1), ierr)
    case (6)
      call MPI_Issend(ds, m, MPI_INTEGER, peer, k, world, reqs(1), ierr)
    case (7)
      call MPI_Ibsend(ds, m, MPI_INTEGER, peer, k, world, reqs(1), ierr)
    case (8)
      call MPI_Irsend(ds, m, MPI_INTEGER, peer, k, world, reqs(1), ierr)
    case (9)
      call MPI_Send_init(ds, m, MPI_INTEGER, peer, k, world, reqs(1), ierr)
    case (10)
      call MPI_Ssend_init(ds, m, MPI_INTEGER, peer, k, world, reqs(1), ierr)
    case (11)
      call MPI_Bsend_init(ds, m, MPI_INTEGER, peer, k, world, reqs(1), ierr)
    case (12)
      call MPI_Rsend_init(ds, m, MPI_INTEGER, peer, k, world, reqs(1), ierr)
    end select
    if (k >= 9) call MPI_Start(reqs(1), ierr)
    if (k >= 5) call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
    if (k >= 9) call MPI_Request_free(reqs(1), ierr)
    call MPI_Wait(reqs(2), MPI_STATUS_IGNORE, ierr)
    hr(1:m) = [(1000 * peer + pos, pos = 1, m)]
    call same('send flavour', k)
  end do

  call MPI_Sendrecv(hs, m, MPI_INTEGER, peer, 20, hr, m, MPI_INTEGER, peer, 20, world, st, ierr)
  call MPI_Sendrecv(ds, m, MPI_INTEGER, peer, 20, dr, m, MPI_INTEGER, peer, 20, world, st, ierr)
  call same('MPI_Sendrecv', 0)
  hr(1:m) = hs(1:m)
  call upload(dr, hr)
  call MPI_Sendrecv_replace(hr, m, MPI_INTEGER, peer, 21, peer, 21, world, st, ierr)
  call MPI_Sendrecv_replace(dr, m, MPI_INTEGER, peer, 21, peer, 21, world, st, ierr)
  call same('MPI_Sendrecv_replace', 0)

#ifdef TEMPI_TEST_F08
  ! The same GPU request twice in MPI_Waitsome (a strided receive, which TEMPI tracks with
  ! any library): TEMPI refuses the call and leaves the indices as they were (MPICH's module
  ! writes outcount from its own temporary whatever the call returns).
  call MPI_Type_vector(m, 1, 2, MPI_INTEGER, types(1), ierr)
  call MPI_Type_commit(types(1), ierr)
  call MPI_Comm_set_errhandler(world, MPI_ERRORS_RETURN, ierr)
  call MPI_Irecv(dr, 1, types(1), peer, 25, world, reqs(1), ierr)
  reqs(2) = reqs(1)
  counts = [7, 9]
  call MPI_Waitsome(2, reqs, k, counts, MPI_STATUSES_IGNORE, ierr)
  if (ierr == MPI_SUCCESS .or. any(counts /= [7, 9])) then
    print *, 'FAIL: MPI_Waitsome with a request twice: ierr', ierr, 'indices', counts
    failures = failures + 1
  end if
  call MPI_Comm_set_errhandler(world, MPI_ERRORS_ARE_FATAL, ierr)
  call MPI_Send(ds, m, MPI_INTEGER, peer, 25, world, ierr)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
  call MPI_Type_free(types(1), ierr)
  hr(1:2 * m - 1:2) = [(1000 * peer + pos, pos = 1, m)]
  call same('MPI_Waitsome refused, then MPI_Wait', 0)
#endif

  ! Probes, then receives into the GPU (matched ones too).
  do k = 1, 4
    call MPI_Send(hs, m, MPI_INTEGER, peer, 30 + k, world, ierr)
    select case (k)
    case (1)
      call MPI_Probe(peer, 31, world, st, ierr)
      call MPI_Recv(dr, m, MPI_INTEGER, peer, 31, world, st, ierr)
    case (2)
      flag = .false.
      do while (.not. flag)
        call MPI_Iprobe(peer, 32, world, flag, st, ierr)
      end do
      call MPI_Recv(dr, m, MPI_INTEGER, peer, 32, world, st, ierr)
    case (3)
      call MPI_Mprobe(peer, 33, world, msg, st, ierr)
      call MPI_Mrecv(dr, m, MPI_INTEGER, msg, st, ierr)
    case (4)
      flag = .false.
      do while (.not. flag)
        call MPI_Improbe(peer, 34, world, flag, msg, st, ierr)
      end do
      call MPI_Imrecv(dr, m, MPI_INTEGER, msg, req, ierr)
      call MPI_Wait(req, st, ierr)
    end select
    hr(1:m) = [(1000 * peer + pos, pos = 1, m)]
    call same('probe and receive', k)
  end do

  ! MPI_Pack from the GPU, MPI_Unpack into it.
  pos = 0
  call MPI_Pack(ds, m, MPI_INTEGER, packed, 4 * n, pos, world, ierr)
  packed_size = pos
  pos = 0
  call MPI_Unpack(packed, 4 * n, pos, dr, m, MPI_INTEGER, world, ierr)
  hr(1:m) = hs(1:m)
  if (packed_size /= 4 * m .or. pos /= 4 * m) then
    print *, 'FAIL: MPI_Pack/MPI_Unpack positions', packed_size, pos
    failures = failures + 1
  end if
  call same('MPI_Pack then MPI_Unpack', 0)

  ! ---- collectives, host then GPU ----
  counts = [m, m]
  displs = [0, m]
  hr(1:m) = hs(1:m)
  call upload(dr, hr)  ! the same contents before the call
  call MPI_Bcast(hr, m, MPI_INTEGER, 1, world, ierr)
  call MPI_Bcast(dr, m, MPI_INTEGER, 1, world, ierr)
  call same('MPI_Bcast', 0)
  hr(1:m) = hs(1:m)
  call upload(dr, hr)
  call MPI_Ibcast(hr, m, MPI_INTEGER, 1, world, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call MPI_Ibcast(dr, m, MPI_INTEGER, 1, world, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  call same('MPI_Ibcast', 0)
  do k = 0, 1  ! blocking, then nonblocking completed by MPI_Wait
    call gather_family(k, hs, hr)
    call gather_family(k, ds, dr)
    call same('gather family', k)
    call scatter_family(k, hs, hr)
    call scatter_family(k, ds, dr)
    call same('scatter family', k)
    call alltoall_family(k, hs, hr)
    call alltoall_family(k, ds, dr)
    call same('alltoall family', k)
    call reduce_family(k, hs, hr)
    call reduce_family(k, ds, dr)
    call same('reduce family', k)
  end do
  call MPI_Reduce_local(hs, hr, m, MPI_INTEGER, MPI_SUM, ierr)
  call MPI_Reduce_local(ds, dr, m, MPI_INTEGER, MPI_SUM, ierr)
  call same('MPI_Reduce_local', 0)

  ! Neighbourhood collectives on a ring of 2, a distributed graph whose two neighbours are
  ! both the peer (MPICH's mpi_f08 MPI_Neighbor_alltoallw asks for a distributed graph).
  call deferred_send(1)
  call MPI_Dist_graph_create_adjacent(world, 2, [peer, peer], MPI_UNWEIGHTED, 2, [peer, peer], MPI_UNWEIGHTED, &
                                      MPI_INFO_NULL, .false., ring, ierr)
  call deferred_send_done()
  do k = 0, 1
    call neighbor_family(k, hs, hr)
    call neighbor_family(k, ds, dr)
    call same('neighbourhood family', k)
  end do

  ! ---- calls that may wait for the other rank: TEMPI's deferred sends go first ----
  call deferred_send(2)
  call MPI_Comm_dup(world, c1, ierr)
  call deferred_send_done()
  call deferred_send(3)
  call MPI_Comm_disconnect(c1, ierr)
  call deferred_send_done()
  call deferred_send(4)
  call MPI_Comm_split(world, rank, 0, c1, ierr)  ! each rank alone
  call deferred_send_done()
  call deferred_send(5)
  call MPI_Intercomm_create(c1, 0, world, peer, 7, c2, ierr)
  call deferred_send_done()
  call MPI_Comm_free(c1, ierr)
  call deferred_send(6)
  call MPI_Intercomm_merge(c2, rank == 1, c1, ierr)
  call deferred_send_done()
  call MPI_Comm_free(c2, ierr)
  call MPI_Comm_free(c1, ierr)
  call MPI_Comm_group(world, group, ierr)
  call deferred_send(7)
  call MPI_Comm_create(world, group, c1, ierr)
  call deferred_send_done()
  call deferred_send(8)
  call MPI_Comm_create_group(world, group, 9, c2, ierr)
  call deferred_send_done()
  call MPI_Group_free(group, ierr)
  call deferred_send(9)
  call MPI_Comm_free(c1, ierr)
  call deferred_send_done()
  call MPI_Comm_free(c2, ierr)
  call deferred_send(10)
  call MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, c1, ierr)
  call deferred_send_done()
  call MPI_Comm_free(c1, ierr)
  call MPI_Comm_free(ring, ierr)
  call deferred_send(11)
  call MPI_Cart_create(world, 1, [2], [.true.], .false., c1, ierr)
  call deferred_send_done()
  call deferred_send(22)
  call MPI_Cart_sub(c1, [.true.], c2, ierr)
  call deferred_send_done()
  call MPI_Comm_free(c2, ierr)
  call MPI_Comm_free(c1, ierr)
  call deferred_send(12)
  call MPI_Graph_create(world, 2, [1, 2], [1, 0], .false., c1, ierr)
  call deferred_send_done()
  call MPI_Comm_free(c1, ierr)
  call deferred_send(13)
  call MPI_Dist_graph_create(world, 1, [rank], [1], [peer], MPI_UNWEIGHTED, MPI_INFO_NULL, .false., c1, ierr)
  call deferred_send_done()
  call MPI_Comm_free(c1, ierr)
  call deferred_send(14)
  call MPI_Dist_graph_create_adjacent(world, 1, [peer], MPI_UNWEIGHTED, 1, [peer], MPI_UNWEIGHTED, &
                                      MPI_INFO_NULL, .false., c1, ierr)
  call deferred_send_done()
  call MPI_Comm_free(c1, ierr)
  win_size = 4 * n
  call deferred_send(15)
  call MPI_Win_create(hr, win_size, 4, MPI_INFO_NULL, world, win, ierr)
  call deferred_send_done()
  call deferred_send(16)
  call MPI_Win_fence(0, win, ierr)
  call deferred_send_done()
  call deferred_send(17)
  call MPI_Win_free(win, ierr)
  call deferred_send_done()
  call deferred_send(18)
  call MPI_Win_allocate(win_size, 4, MPI_INFO_NULL, world, baseptr, win, ierr)
  call deferred_send_done()
  call MPI_Win_free(win, ierr)
  call deferred_send(19)
  call MPI_File_open(world, 'tempi_every_call.tmp', MPI_MODE_CREATE + MPI_MODE_RDWR + MPI_MODE_DELETE_ON_CLOSE, &
                     MPI_INFO_NULL, fh, ierr)
  call deferred_send_done()
  call deferred_send(20)
  call MPI_File_close(fh, ierr)
  call deferred_send_done()
  call deferred_send(21)
#ifdef TEMPI_TEST_F08
  call MPI_Buffer_detach(detached, detached_size, ierr)
#else
  call MPI_Buffer_detach(bsend_buffer, detached_size, ierr)
#endif
  call deferred_send_done()
  if (detached_size /= 4 * size_of_bsend()) then
    print *, 'FAIL: MPI_Buffer_detach size', detached_size
    failures = failures + 1
  end if

  ! A datatype committed and freed: the handle goes back to MPI_DATATYPE_NULL.
  call MPI_Type_contiguous(2, MPI_INTEGER, types(1), ierr)
  call MPI_Type_commit(types(1), ierr)
  call MPI_Type_free(types(1), ierr)
  if (types(1) /= MPI_DATATYPE_NULL) then
    print *, 'FAIL: MPI_Type_free leaves the handle'
    failures = failures + 1
  end if

  call free_device_array(ds)
  call free_device_array(dr)
  call MPI_Finalize(ierr)
  if (failures > 0) error stop 1
#ifdef TEMPI_TEST_F08
  if (rank == 1) print '(a)', 'PASS: every wrapped call from mpi_f08'
#else
  if (rank == 1) print '(a)', 'PASS: every wrapped call from use mpi'
#endif

contains

  integer function size_of_bsend()
    size_of_bsend = 1024  ! integers: room for the buffered sends above
  end function

  ! The device result dr equals the host result hr; both start again from the sentinel.
  subroutine same(what, k)
    character(*), intent(in) :: what
    integer, intent(in) :: k
    integer :: got(n)
    got = download(dr)
    if (any(got /= hr)) then
      failures = failures + 1
      print '(a, a, i3, a, 4i6, a, 4i6)', 'FAIL: ', what, k, ': GPU', got(1:4), ' host', hr(1:4)
    end if
    hr = sentinel
    call upload(dr, hr)
  end subroutine

  ! Rank 0 starts a send from the GPU, which TEMPI defers; rank 1 receives it before the
  ! call that follows, so rank 0's call must post it.
  subroutine deferred_send(tag)
    integer, intent(in) :: tag
    integer :: got(n)
    if (rank == 0) then
      call MPI_Isend(ds, m, MPI_INTEGER, 1, 100 + tag, world, req, ierr)
    else
      got = sentinel
      call MPI_Recv(got, m, MPI_INTEGER, 0, 100 + tag, world, MPI_STATUS_IGNORE, ierr)
      if (any(got(1:m) /= [(pos, pos = 1, m)])) then
        print *, 'FAIL: deferred send', tag, got(1:4)
        failures = failures + 1
      end if
    end if
  end subroutine

  subroutine deferred_send_done()
    if (rank == 0) call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  end subroutine

  subroutine finish(k)
    integer, intent(in) :: k
    if (k == 1) call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  end subroutine

  ! Each call of a family in turn, into disjoint parts of r; k = 1: nonblocking.
  subroutine gather_family(k, s, r)
    integer, intent(in) :: k
    integer, intent(in) :: s(*)
    integer :: r(*)
    if (k == 0) then
      call MPI_Gather(s, m, MPI_INTEGER, r, m, MPI_INTEGER, 0, world, ierr)
      call MPI_Gatherv(s, m, MPI_INTEGER, r(17), counts, displs, MPI_INTEGER, 1, world, ierr)
      call MPI_Allgather(s, m, MPI_INTEGER, r(33), m, MPI_INTEGER, world, ierr)
      call MPI_Allgatherv(s, m, MPI_INTEGER, r(49), counts, displs, MPI_INTEGER, world, ierr)
    else
      call MPI_Igather(s, m, MPI_INTEGER, r, m, MPI_INTEGER, 0, world, req, ierr)
      call finish(k)
      call MPI_Igatherv(s, m, MPI_INTEGER, r(17), counts, displs, MPI_INTEGER, 1, world, req, ierr)
      call finish(k)
      call MPI_Iallgather(s, m, MPI_INTEGER, r(33), m, MPI_INTEGER, world, req, ierr)
      call finish(k)
      call MPI_Iallgatherv(s, m, MPI_INTEGER, r(49), counts, displs, MPI_INTEGER, world, req, ierr)
      call finish(k)
    end if
  end subroutine

  subroutine scatter_family(k, s, r)
    integer, intent(in) :: k
    integer, intent(in) :: s(*)
    integer :: r(*)
    if (k == 0) then
      call MPI_Scatter(s, m, MPI_INTEGER, r, m, MPI_INTEGER, 0, world, ierr)
      call MPI_Scatterv(s, counts, displs, MPI_INTEGER, r(17), m, MPI_INTEGER, 1, world, ierr)
    else
      call MPI_Iscatter(s, m, MPI_INTEGER, r, m, MPI_INTEGER, 0, world, req, ierr)
      call finish(k)
      call MPI_Iscatterv(s, counts, displs, MPI_INTEGER, r(17), m, MPI_INTEGER, 1, world, req, ierr)
      call finish(k)
    end if
  end subroutine

  subroutine alltoall_family(k, s, r)
    integer, intent(in) :: k
    integer, intent(in) :: s(*)
    integer :: r(*)
    types = [MPI_INTEGER, MPI_INTEGER]
    if (k == 0) then
      call MPI_Alltoall(s, m, MPI_INTEGER, r, m, MPI_INTEGER, world, ierr)
      call MPI_Alltoallv(s, counts, displs, MPI_INTEGER, r(17), counts, displs, MPI_INTEGER, world, ierr)
      call MPI_Alltoallw(s, counts, 4 * displs, types, r(33), counts, 4 * displs, types, world, ierr)
    else
      call MPI_Ialltoall(s, m, MPI_INTEGER, r, m, MPI_INTEGER, world, req, ierr)
      call finish(k)
      call MPI_Ialltoallv(s, counts, displs, MPI_INTEGER, r(17), counts, displs, MPI_INTEGER, world, req, ierr)
      call finish(k)
      call MPI_Ialltoallw(s, counts, 4 * displs, types, r(33), counts, 4 * displs, types, world, req, ierr)
      call finish(k)
    end if
  end subroutine

  subroutine reduce_family(k, s, r)
    integer, intent(in) :: k
    integer, intent(in) :: s(*)
    integer :: r(*)
    if (k == 0) then
      call MPI_Reduce(s, r, m, MPI_INTEGER, MPI_SUM, 0, world, ierr)
      call MPI_Allreduce(s, r(9), m, MPI_INTEGER, MPI_MAX, world, ierr)
      call MPI_Reduce_scatter(s, r(17), [4, 4], MPI_INTEGER, MPI_SUM, world, ierr)
      call MPI_Reduce_scatter_block(s, r(25), 4, MPI_INTEGER, MPI_SUM, world, ierr)
      call MPI_Scan(s, r(33), m, MPI_INTEGER, MPI_SUM, world, ierr)
      call MPI_Exscan(s, r(41), m, MPI_INTEGER, MPI_SUM, world, ierr)
    else
      call MPI_Ireduce(s, r, m, MPI_INTEGER, MPI_SUM, 0, world, req, ierr)
      call finish(k)
      call MPI_Iallreduce(s, r(9), m, MPI_INTEGER, MPI_MAX, world, req, ierr)
      call finish(k)
      call MPI_Ireduce_scatter(s, r(17), [4, 4], MPI_INTEGER, MPI_SUM, world, req, ierr)
      call finish(k)
      call MPI_Ireduce_scatter_block(s, r(25), 4, MPI_INTEGER, MPI_SUM, world, req, ierr)
      call finish(k)
      call MPI_Iscan(s, r(33), m, MPI_INTEGER, MPI_SUM, world, req, ierr)
      call finish(k)
      call MPI_Iexscan(s, r(41), m, MPI_INTEGER, MPI_SUM, world, req, ierr)
      call finish(k)
    end if
  end subroutine

  subroutine neighbor_family(k, s, r)
    integer, intent(in) :: k
    integer, intent(in) :: s(*)
    integer :: r(*)
    types = [MPI_INTEGER, MPI_INTEGER]
    adispls = 4 * displs
    if (k == 0) then
      call MPI_Neighbor_allgather(s, m, MPI_INTEGER, r, m, MPI_INTEGER, ring, ierr)
      call MPI_Neighbor_allgatherv(s, m, MPI_INTEGER, r(17), counts, displs, MPI_INTEGER, ring, ierr)
      call MPI_Neighbor_alltoall(s, m, MPI_INTEGER, r(33), m, MPI_INTEGER, ring, ierr)
      call MPI_Neighbor_alltoallv(s, counts, displs, MPI_INTEGER, r(49), counts, displs, MPI_INTEGER, ring, ierr)
    else
      call MPI_Ineighbor_allgather(s, m, MPI_INTEGER, r, m, MPI_INTEGER, ring, req, ierr)
      call finish(k)
      call MPI_Ineighbor_allgatherv(s, m, MPI_INTEGER, r(17), counts, displs, MPI_INTEGER, ring, req, ierr)
      call finish(k)
      call MPI_Ineighbor_alltoall(s, m, MPI_INTEGER, r(33), m, MPI_INTEGER, ring, req, ierr)
      call finish(k)
      call MPI_Ineighbor_alltoallv(s, counts, displs, MPI_INTEGER, r(49), counts, displs, MPI_INTEGER, ring, req, ierr)
      call finish(k)
    end if
    ! The w form into what is left: 4 integers from each neighbour.
    if (k == 0) then
      call MPI_Neighbor_alltoallw(s, [4, 4], adispls, types, r(57), [4, 4], [0_MPI_ADDRESS_KIND, 16_MPI_ADDRESS_KIND], &
                                  types, ring, ierr)
    else
      call MPI_Ineighbor_alltoallw(s, [4, 4], adispls, types, r(57), [4, 4], [0_MPI_ADDRESS_KIND, 16_MPI_ADDRESS_KIND], &
                                   types, ring, req, ierr)
      call finish(k)
    end if
  end subroutine
end program
